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
