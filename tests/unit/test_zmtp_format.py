"""The ZMTP 3.1 bytes the native client writes and reads itself (zmtp_format.py): golden bytes
from RFC 37, checked against libzmq too (a real ROUTER reads our greeting and frames,
tests/unit/test_zmtp_client.py)."""

import pytest

from rocketbox.cluster import zmtp_format as zf


def test_greeting_is_rfc37s_64_bytes():
    expected = (b"\xff\x00\x00\x00\x00\x00\x00\x00\x00\x7f"   # signature
                b"\x03\x01"                                     # version 3.1
                b"NULL" + b"\x00" * 16 +                        # mechanism, 20 bytes
                b"\x00" +                                       # as-server: no
                b"\x00" * 31)                                   # filler
    assert zf.greeting() == expected
    assert len(expected) == zf.GREETING_BYTES
    assert zf.parse_greeting(expected) == ((3, 1), b"NULL")
    curve = zf.greeting(b"CURVE", as_server=True)
    assert zf.parse_greeting(curve) == ((3, 1), b"CURVE")
    assert curve[32] == 1


@pytest.mark.parametrize("bad", [b"GET / HTTP/1.1\r\n" + b"\x00" * 48, b"\xff" + b"\x00" * 63,
                                 zf.SIGNATURE + b"\x02\x00" + b"\x00" * 52, zf.greeting()[:63]])
def test_what_is_not_a_zmtp3_greeting_is_refused(bad):
    with pytest.raises(zf.ZmtpError):
        zf.parse_greeting(bad)


def test_ready_as_libzmqs_dealer_sends_it():
    assert zf.ready(b"DEALER") == (b"\x04\x29" + b"\x05READY"
                                   + b"\x0bSocket-Type" + b"\x00\x00\x00\x06DEALER"
                                   + b"\x08Identity" + b"\x00\x00\x00\x00")
    name, body = zf.parse_command(zf.ready(b"DEALER")[2:])
    assert name == b"READY"
    assert zf.parse_properties(body) == {b"Socket-Type": b"DEALER", b"Identity": b""}


def test_frames_short_long_and_more():
    assert zf.frame(b"abc") == b"\x00\x03abc"
    assert zf.frame(b"abc", more=True) == b"\x01\x03abc"
    assert zf.frame(b"x" * 255) == b"\x00\xff" + b"x" * 255
    assert zf.frame(b"x" * 256) == b"\x02\x00\x00\x00\x00\x00\x00\x01\x00" + b"x" * 256
    assert zf.message([b"head", memoryview(b"body")]) == b"\x01\x04head\x00\x04body"
    assert zf.message([b""]) == b"\x00\x00"


def test_ping_is_answered_with_its_context():
    # PING: ttl (2 bytes, deciseconds) then context; PONG carries the context back.
    assert zf.pong(b"\x00\x64ctx") == b"\x04\x08\x04PONGctx"
    assert zf.pong(b"\x00\x00") == b"\x04\x05\x04PONG"
    with pytest.raises(zf.ZmtpError):
        zf.pong(b"\x00")
    with pytest.raises(zf.ZmtpError):
        zf.pong(b"\x00\x00" + b"c" * 17)
    assert zf.error_reason(b"\x06denied") == "denied"


def test_the_reader_takes_frames_as_bytes_arrive():
    stream = zf.greeting() + zf.command(b"READY") + zf.message([b"h" * 300, b"b"])
    reader = zf.FrameReader(1024)
    frames = []
    greeting = None
    for byte in stream:   # one byte at a time: every partial state is met
        reader.feed(bytes((byte,)))
        if greeting is None:
            greeting = reader.take(zf.GREETING_BYTES)
            continue
        got = reader.next_frame()
        if got is not None:
            frames.append(got)
    assert greeting == zf.greeting()
    assert frames == [(zf.FLAG_COMMAND, b"\x05READY"), (zf.FLAG_MORE | zf.FLAG_LONG, b"h" * 300), (0, b"b")]
    assert len(reader) == 0 and reader.next_frame() is None


def test_the_reader_refuses_oversized_and_unknown_frames():
    reader = zf.FrameReader(100)
    reader.feed(zf.frame(b"x" * 101))
    with pytest.raises(zf.ZmtpError, match="over the 100-byte bound"):
        reader.next_frame()
    reader = zf.FrameReader(100)
    reader.feed(b"\x80\x01x")
    with pytest.raises(zf.ZmtpError, match="unknown flags"):
        reader.next_frame()
    with pytest.raises(zf.ZmtpError):
        zf.parse_properties(b"\x0bSocket-Type\x00\x00\x00\x09DEAL")
    with pytest.raises(zf.ZmtpError):
        zf.parse_command(b"\x05REA")


# ---------------------------------------------------------------- the door's side (ServerSession)

def _opened_session(frame_bytes_max: int = 1024) -> zf.ServerSession:
    session = zf.ServerSession(frame_bytes_max)
    assert session.feed(zf.greeting() + zf.ready(b"DEALER", b"")) == []
    assert session.open and session.peer_socket_type == b"DEALER"
    return session


def test_the_doors_greeting_and_ready_are_libzmq_routers_bytes():
    # As a libzmq ROUTER (NULL) sends them: as-server set, then READY with Socket-Type and Identity.
    assert zf.ServerSession.opening() == (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01" + b"NULL" + b"\x00" * 16
                                          + b"\x01" + b"\x00" * 31)
    session = zf.ServerSession(1024)
    assert session.feed(zf.greeting()) == [] and session.take_outgoing() == b""
    assert session.feed(zf.ready(b"DEALER", b"")) == []
    assert session.take_outgoing() == (b"\x04\x29" + b"\x05READY" + b"\x0bSocket-Type" + b"\x00\x00\x00\x06ROUTER"
                                       + b"\x08Identity" + b"\x00\x00\x00\x00")
    assert session.take_outgoing() == b""


def test_the_door_reads_messages_of_parts_byte_by_byte():
    session = zf.ServerSession(1024)
    stream = zf.greeting() + zf.ready(b"DEALER") + b"\x01\x04head\x00\x04body" + zf.message([b"h" * 300, b""]) \
        + b"\x00\x01x"
    messages = []
    for byte in stream:
        messages += session.feed(bytes((byte,)))
        if len(messages) < 3:
            assert session.buffered_bytes < 400
    assert messages == [[b"head", b"body"], [b"h" * 300, b""], [b"x"]]
    assert session.buffered_bytes == 0


def test_the_door_answers_a_ping_and_ignores_a_pong():
    session = _opened_session()
    session.take_outgoing()
    assert session.feed(b"\x04\x09\x04PING\x00\x64ab" + zf.command(b"PONG", b"cd")) == []
    assert session.take_outgoing() == b"\x04\x07\x04PONGab"
    assert zf.ping() == b"\x04\x07\x04PING\x00\x00"
    assert zf.ping(100, b"ctx") == b"\x04\x0a\x04PING\x00\x64ctx"


@pytest.mark.parametrize("stream, reason", [
    (zf.greeting(b"CURVE"), "takes only NULL"),
    (b"\x00\x00\x00\x20\x00\x00\x00\x10", "not a ZMTP greeting"),          # a RocketMQ remoting frame
    (b"GET / HTTP/1.1\r\n", "not a ZMTP greeting"),
    (zf.SIGNATURE + b"\x02\x00" + b"\x00" * 52, "not 3.x"),
    (zf.greeting() + zf.message([b"head", b"body"]), "before the READY"),
    (zf.greeting() + zf.ready(b"PUB"), "'PUB' socket cannot talk"),
    (zf.greeting() + zf.command(b"HELLO"), "where READY was due"),
    (zf.greeting() + zf.command(b"ERROR", b"\x04nope"), "gave up: nope"),
    (zf.greeting() + zf.ready(b"DEALER") + zf.frame(b"x" * 2000), "over the 1024-byte bound"),
    (zf.greeting() + zf.ready(b"DEALER") + b"\x01\x01x" * zf.MESSAGE_PARTS_MAX, "more than 16 parts"),
])
def test_the_door_refuses_what_it_cannot_read_on(stream, reason):
    session = zf.ServerSession(1024)
    with pytest.raises(zf.ZmtpStreamError, match=reason):
        session.feed(stream)


def test_the_messages_before_a_fault_are_still_owed_answers():
    session = _opened_session()
    with pytest.raises(zf.ZmtpStreamError) as raised:
        session.feed(zf.message([b"a", b"b"]) + zf.message([b"c"]) + b"\x80\x00")
    assert raised.value.messages == [[b"a", b"b"], [b"c"]]
