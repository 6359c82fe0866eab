"""The client's side of a ZMTP 3.1 NULL connection (zmtp_format.ClientSession), bytes in -> messages
or errors out: what both clients (zmtp_client.ZmtpConnection, proxy/loop_calls) write and how they
read a door. Against a real door (libzmq's ROUTER, ours): tests/unit/test_zmtp_client.py,
tests/unit/test_proxy_loop_calls.py."""

import pytest

from rocketbox.cluster import zmtp_format as zf

# A door's (libzmq ROUTER, NULL) greeting and READY, as ServerSession sends them.
DOOR_GREETING = zf.greeting(as_server=True)
DOOR_READY = zf.ready(b"ROUTER")
CLIENT_GREETING = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01" + b"NULL" + b"\x00" * 16 + b"\x00" + b"\x00" * 31
CLIENT_READY = (b"\x04\x29" + b"\x05READY" + b"\x0bSocket-Type" + b"\x00\x00\x00\x06DEALER"
                + b"\x08Identity" + b"\x00\x00\x00\x00")


def _opened_session() -> zf.ClientSession:
    session = zf.ClientSession(1024)
    assert session.feed(DOOR_GREETING + DOOR_READY) == []
    assert session.open
    session.take_outgoing()
    return session


def test_the_clients_greeting_and_ready_are_libzmq_dealers_bytes():
    session = zf.ClientSession(1024)
    assert session.opening() == CLIENT_GREETING
    assert session.take_outgoing() == b""
    # READY only once the door's greeting came whole (a CURVE door closes at our greeting).
    assert session.feed(DOOR_GREETING[:-1]) == [] and session.take_outgoing() == b""
    assert session.feed(DOOR_GREETING[-1:]) == [] and session.take_outgoing() == CLIENT_READY
    assert not session.open
    assert session.feed(DOOR_READY) == [] and session.open
    assert session.take_outgoing() == b""


def test_requests_before_the_doors_ready_are_held_until_it():
    session = zf.ClientSession(1024)
    assert session.request([b"head", b"body"]) == b""
    session.feed(DOOR_GREETING)
    assert session.take_outgoing() == CLIENT_READY
    session.feed(DOOR_READY)
    assert session.take_outgoing() == b"\x01\x04head\x00\x04body"
    assert session.request([b"h2", b""]) == b"\x01\x02h2\x00\x00"
    assert session.take_outgoing() == b""


def test_the_client_reads_the_handshake_and_messages_at_every_byte_boundary():
    stream = DOOR_GREETING + DOOR_READY + b"\x01\x04head\x00\x04body" + zf.message([b"h" * 300, b""]) \
        + zf.ping(0, b"ctx") + b"\x00\x01x"
    expected = [[b"head", b"body"], [b"h" * 300, b""], [b"x"]]
    for cut in range(1, len(stream)):
        session = zf.ClientSession(1024)
        assert session.feed(stream[:cut]) + session.feed(stream[cut:]) == expected, cut
        assert session.take_outgoing() == CLIENT_READY + b"\x04\x08\x04PONGctx"
    session = zf.ClientSession(1024)
    messages = []
    for byte in stream:
        messages += session.feed(bytes((byte,)))
    assert messages == expected


def test_next_message_gives_one_message_at_a_time_from_the_fed_reader():
    session = _opened_session()
    session.reader.feed(zf.message([b"a", b"b"]) + zf.message([b"c"]) + b"\x00")
    assert session.next_message() == [b"a", b"b"]
    assert session.next_message() == [b"c"]
    assert session.next_message() is None
    session.reader.feed(b"\x01d")
    assert session.next_message() == [b"d"]


def test_a_ping_is_answered_with_pong_and_a_pong_is_ignored():
    session = _opened_session()
    assert session.feed(b"\x04\x09\x04PING\x00\x64ab" + zf.command(b"PONG", b"cd")) == []
    assert session.take_outgoing() == b"\x04\x07\x04PONGab"
    assert session.take_outgoing() == b""


def test_the_doors_error_ends_the_session_with_its_reason():
    session = _opened_session()
    with pytest.raises(zf.ZmtpError, match="the door sent ERROR: too many connections"):
        session.feed(zf.command(b"ERROR", b"\x14too many connections"))
    handshaking = zf.ClientSession(1024)
    with pytest.raises(zf.ZmtpError, match="ERROR: nope"):
        handshaking.feed(DOOR_GREETING + zf.command(b"ERROR", b"\x04nope"))


@pytest.mark.parametrize("stream, error, reason", [
    (zf.greeting(b"CURVE", as_server=True), zf.MechanismRefused, "mechanism is CURVE"),
    (b"\x00\x00\x00\x20\x00\x00\x00\x10", zf.ZmtpError, "not a ZMTP greeting"),   # a RocketMQ remoting door
    (zf.SIGNATURE + b"\x02\x00" + b"\x00" * 52, zf.ZmtpError, "not 3.x"),
    (DOOR_GREETING + zf.message([b"head", b"body"]), zf.ZmtpError, "before the READY handshake"),
    (DOOR_GREETING + b"\x01\x04head", zf.ZmtpError, "before the READY handshake"),
    (DOOR_GREETING + zf.ready(b"PUB"), zf.ZmtpError, "'PUB' socket cannot talk to a DEALER"),
    (DOOR_GREETING + zf.command(b"HELLO"), zf.ZmtpError, "where READY was due"),
    (DOOR_GREETING + DOOR_READY + zf.frame(b"x" * 2000), zf.ZmtpError, "over the 1024-byte bound"),
    (DOOR_GREETING + DOOR_READY + b"\x01\x01x" * zf.MESSAGE_PARTS_MAX, zf.ZmtpError, "more than 16 parts"),
])
def test_the_client_refuses_a_door_it_cannot_read_on(stream, error, reason):
    session = zf.ClientSession(1024)
    with pytest.raises(error, match=reason):
        session.feed(stream)


def test_a_door_that_closes_at_the_greeting_refuses_null():
    # A CURVE door closes at our greeting, at most its 10-byte signature sent: a refusal, not a loss.
    session = zf.ClientSession(1024)
    session.feed(zf.SIGNATURE)
    refusal = session.close_refusal()
    assert isinstance(refusal, zf.MechanismRefused) and "not NULL" in str(refusal)
    # Once its greeting came a close is only a lost connection.
    session.feed(DOOR_GREETING[len(zf.SIGNATURE):])
    assert session.close_refusal() is None
