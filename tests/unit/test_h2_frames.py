"""Golden tests of the gRPC door's HTTP/2 front end (``cluster/_native/h2_conn.c``, ``h2_answer.c``,
``h2_hpack.c`` through ``_native/h2.py``): bytes in, events and exact bytes out, no socket. The header blocks of
RFC 7541's Appendix C.4 (Huffman strings, the dynamic table across requests) are decoded; answers,
trailers, SETTINGS, PING, GOAWAY and flow control are checked byte for byte against RFC 9113."""

from __future__ import annotations

import struct

import pytest

from rocketbox.cluster._native import lib
from rocketbox.cluster._native.h2 import (EVENT_END, EVENT_HEADERS, EVENT_MESSAGE, EVENT_RESET, H2Connection,
                                          fields_of)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 1, 4
# :status 200 (static index 8); content-type: application/grpc (a literal of static name 31: 0x0f 0x10)
RESPONSE_HEADERS = bytes.fromhex("880f1010") + b"application/grpc"
OK_TRAILERS = b"\x00\x0bgrpc-status\x010"


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def grpc_message(body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(body)) + body


def frames_of(data: bytes) -> list[tuple[int, int, int, bytes]]:
    out, at = [], 0
    while at < len(data):
        length = int.from_bytes(data[at:at + 3], "big")
        kind, flags = data[at + 3], data[at + 4]
        stream = int.from_bytes(data[at + 5:at + 9], "big") & 0x7FFFFFFF
        out.append((kind, flags, stream, data[at + 9:at + 9 + length]))
        at += 9 + length
    return out


def take(conn: H2Connection) -> bytes:
    out = bytes(conn.output())
    conn.sent(len(out))
    return out


def opened(max_streams: int = 100, max_message: int = 1 << 20) -> H2Connection:
    conn = H2Connection(max_streams, max_message, 2 * max_message)
    take(conn)
    assert conn.feed(PREFACE + frame(SETTINGS, 0, 0)) == []
    assert take(conn) == frame(SETTINGS, 1, 0)   # our ACK of theirs
    return conn


# A gRPC request's header block: :method POST, :scheme http, :path (literal, static name 4), te: trailers.
def request_block(path: bytes = b"/apache.rocketmq.v2.MessagingService/SendMessage", extra: bytes = b"") -> bytes:
    return b"\x83\x86\x04" + bytes([len(path)]) + path + b"\x00\x02te\x08trailers" + extra


def test_a_new_connection_says_its_settings_and_opens_the_connection_window():
    conn = H2Connection(100, 1 << 20, 2 << 20)
    settings = struct.pack(">HIHIHI", 3, 100, 4, 1 << 20, 6, 65536)
    assert bytes(conn.output()) == frame(SETTINGS, 0, 0, settings) + \
        frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 24) - 65535))
    assert conn.feed(PREFACE[:20]) == [] and not conn.state()["preface"]   # half a preface waits
    assert conn.feed(PREFACE[20:]) == [] and conn.state()["preface"]


def test_rfc7541_c4_requests_with_huffman_and_the_dynamic_table():
    conn = opened()
    first = bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")
    second = bytes.fromhex("828684be5886a8eb10649cbf")
    third = bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")
    events = conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, first)
                       + frame(HEADERS, END_HEADERS | END_STREAM, 3, second)
                       + frame(HEADERS, END_HEADERS | END_STREAM, 5, third))
    assert [(kind, stream) for kind, stream, _ in events] == [
        (EVENT_HEADERS, 1), (EVENT_END, 1), (EVENT_HEADERS, 3), (EVENT_END, 3), (EVENT_HEADERS, 5), (EVENT_END, 5)]
    assert events[0][2] == b":method\0GET\0:scheme\0http\0:path\0/\0:authority\0www.example.com\0"
    assert fields_of(events[0][2]) == [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                                       (":authority", "www.example.com")]
    assert fields_of(events[2][2]) == [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                                       (":authority", "www.example.com"), ("cache-control", "no-cache")]
    assert fields_of(events[4][2]) == [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"),
                                       (":authority", "www.example.com"), ("custom-key", "custom-value")]


def hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    """RFC 7541 5.1's integer, its first byte's high bits ``first``."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out, value = bytearray([first | limit]), value - limit
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytearray([value]))


# 4,000 bytes into the dynamic table once, then indexed 17 times: a 4 KB block of 72 KB of fields.
LARGE_FIELDS = b"\x40\x01k" + hpack_int(4000, 7, 0) + b"v" * 4000 + b"\xbe" * 17


@pytest.mark.parametrize("field, status, why", [
    (b"\x00\x01k\x03a\x00b", b"13", b"NUL"),     # RFC 9113 8.2.1: malformed
    (LARGE_FIELDS, b"8", b"larger"),
])
def test_a_request_with_bad_fields_is_answered_and_the_connection_goes_on(field, status, why):
    conn = opened()
    data = frame(HEADERS, END_HEADERS, 1, request_block(extra=field))
    assert conn.feed(data) == [(EVENT_RESET, 1, b"")]   # Python never sees the request
    (answer,) = [p for kind, _, _, p in frames_of(take(conn)) if kind == HEADERS]
    assert b"grpc-status\x01" + status in answer or b"grpc-status\x02" + status in answer
    assert why in answer
    assert conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block()))[0][:2] == (EVENT_HEADERS, 3)


def test_a_message_split_across_frames_and_reads_is_one_event():
    conn = opened()
    assert [k for k, _, _ in conn.feed(frame(HEADERS, END_HEADERS, 1, request_block()))] == [EVENT_HEADERS]
    data = frame(DATA, 0, 1, grpc_message(b"hello")[:3]) + frame(DATA, END_STREAM, 1, grpc_message(b"hello")[3:])
    assert conn.feed(data[:7]) == []                 # half a frame header
    assert conn.feed(data[7:20]) == []
    assert conn.feed(data[20:]) == [(EVENT_MESSAGE, 1, b"hello"), (EVENT_END, 1, b"")]


def test_a_unary_answer_is_headers_data_and_trailers():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS, 1, request_block()) + frame(DATA, END_STREAM, 1, grpc_message(b"q")))
    assert conn.answers([(1, b"hi")]) == 1
    assert take(conn) == frame(HEADERS, END_HEADERS, 1, RESPONSE_HEADERS) + \
        frame(DATA, 0, 1, grpc_message(b"hi")) + frame(HEADERS, END_HEADERS | END_STREAM, 1, OK_TRAILERS)
    assert conn.state()["open"] == 0
    assert conn.answers([(1, b"again")]) == 0          # the stream is gone: nothing written
    assert take(conn) == b""


def test_a_streams_run_of_messages_is_framed_together_several_messages_a_data_frame():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block(b"/x/ReceiveMessage")))
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block(b"/x/ReceiveMessage")))
    run = [b"status", b"m" * 300, b"", b"timestamp"]
    assert conn.messages(1, run)
    assert take(conn) == frame(HEADERS, END_HEADERS, 1, RESPONSE_HEADERS) + \
        frame(DATA, 0, 1, b"".join(grpc_message(m) for m in run))   # one DATA frame for the four
    for message in run:   # one message a call: a DATA frame each
        assert conn.message(3, message)
    assert [kind for kind, _, _, _ in frames_of(take(conn))] == [HEADERS] + [DATA] * len(run)
    assert conn.trailers(1, 0)
    assert take(conn) == frame(HEADERS, END_HEADERS | END_STREAM, 1, OK_TRAILERS)
    assert not conn.messages(1, [b"late"])             # the stream is over: nothing written
    assert take(conn) == b""


def test_a_run_larger_than_the_windows_waits_for_them_and_a_bad_block_frames_nothing():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block(b"/x/ReceiveMessage")))
    run = [bytes([i]) * 20_000 for i in range(5)]      # 100,025 framed bytes: over the 65,535 window
    assert conn.messages(1, run)
    conn.trailers(1, 0)
    sent = frames_of(take(conn))
    assert sum(len(p) for kind, _, _, p in sent if kind == DATA) == 65535
    assert all(len(p) <= 16384 for kind, _, _, p in sent if kind == DATA)   # SETTINGS_MAX_FRAME_SIZE
    conn.feed(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 20)) + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)))
    rest = frames_of(take(conn))
    assert b"".join(p for kind, _, _, p in sent + rest if kind == DATA) == b"".join(grpc_message(m) for m in run)
    assert rest[-1] == (HEADERS, END_HEADERS | END_STREAM, 1, OK_TRAILERS)
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block(b"/x/ReceiveMessage")))
    for bad in (b"\x01" + struct.pack(">I", 1) + b"x",   # a compressed flag
                grpc_message(b"ok") + b"\x00" + struct.pack(">I", 9) + b"short",   # a length past the block
                grpc_message(b"ok") + b"\x00\x00"):   # half a prefix
        assert lib.rb_h2_messages(conn._c, 3, bad, len(bad)) == lib.RB_E_ARGUMENT
    assert take(conn) == b""


def test_an_error_before_any_answer_is_a_trailers_only_response_percent_encoded():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    assert conn.trailers(1, 12, "no 100% é")
    block = RESPONSE_HEADERS + b"\x00\x0bgrpc-status\x0212" + b"\x00\x0cgrpc-message\x10no 100%25 %C3%A9"
    assert take(conn) == frame(HEADERS, END_HEADERS | END_STREAM, 1, block)


def test_grpc_message_is_cut_to_the_clients_header_list_size_never_inside_an_escape():
    conn = opened()
    conn.feed(frame(SETTINGS, 0, 0, struct.pack(">HI", 6, 256 + 10)))   # MAX_HEADER_LIST_SIZE: 10 bytes of room
    take(conn)
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    assert conn.trailers(1, 12, "abcdefgh\u00e9xyz")                    # the escape would end at byte 14: left out
    block = RESPONSE_HEADERS + b"\x00\x0bgrpc-status\x0212" + b"\x00\x0cgrpc-message\x08abcdefgh"
    assert take(conn) == frame(HEADERS, END_HEADERS | END_STREAM, 1, block)


def test_without_the_clients_header_list_size_a_long_message_is_cut_at_4096_bytes_before_encoding():
    conn = opened()   # grpc-java says 8192: 3,000 bytes to escape would be 9,000 and were sent whole before
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    conn.trailers(1, 12, "\u00e9" * 3000)   # 6,000 bytes of UTF-8: 4,096 of them encoded, 12,288 bytes
    (kind, _, _, first), *rest = frames_of(take(conn))
    block = first + b"".join(payload for _, _, _, payload in rest)
    assert block.endswith(b"%C3%A9" * 2048) and b"\x7f\x81\x5f" in block   # 12,288 = 127 + 12,161 (varint)


def test_grpc_javas_8192_header_list_keeps_a_long_message_under_it():
    conn = opened()
    conn.feed(frame(SETTINGS, 0, 0, struct.pack(">HI", 6, 8192)))
    take(conn)
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    conn.trailers(1, 12, "\u00e9" * 3000)
    (_, _, _, block), = frames_of(take(conn))
    message = block.split(b"grpc-message", 1)[1][3:]   # past the length's 3 bytes (127 + varint)
    assert len(message) == 8192 - 256 - (8192 - 256) % 3 and message == b"%C3%A9" * (len(message) // 6) + \
        b"%C3%A9"[:len(message) % 6]


def test_a_client_still_sending_when_the_call_ends_is_told_to_stop():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS, 1, request_block()))
    conn.trailers(1, 0)
    assert frames_of(take(conn))[-1] == (RST_STREAM, 0, 1, b"\x00\x00\x00\x00")


def test_ping_is_answered_with_its_payload():
    conn = opened()
    assert conn.feed(frame(PING, 0, 0, b"12345678")) == []
    assert take(conn) == frame(PING, 1, 0, b"12345678")


def test_the_client_reset_is_an_event_and_ends_the_stream():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS, 1, request_block()))
    assert conn.feed(frame(RST_STREAM, 0, 1, b"\x00\x00\x00\x08")) == [(EVENT_RESET, 1, b"")]
    assert conn.state()["open"] == 0


def test_answers_wait_for_the_peers_windows():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    body = bytes(range(256)) * 400                     # 102,400 bytes: more than the default 65,535 window
    conn.answers([(1, body)])
    sent = frames_of(take(conn))
    assert sum(len(p) for kind, _, _, p in sent if kind == DATA) == 65535
    assert sent[-1][0] == DATA                          # no trailers before the last byte
    conn.feed(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 20)))   # the stream's window alone: still stuck
    assert take(conn) == b""
    conn.feed(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)))
    rest = frames_of(take(conn))
    payload = b"".join(p for kind, _, _, p in sent + rest if kind == DATA)
    assert payload == grpc_message(body)
    assert rest[-1] == (HEADERS, END_HEADERS | END_STREAM, 1, OK_TRAILERS)


def test_a_larger_initial_window_from_settings_applies_to_open_streams():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    conn.feed(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)))
    conn.answers([(1, b"x" * 100_000)])
    assert sum(len(p) for kind, _, _, p in frames_of(take(conn)) if kind == DATA) == 65535
    conn.feed(frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 200_000)))
    rest = frames_of(take(conn))
    assert rest[0] == (SETTINGS, 1, 0, b"")
    assert rest[-1][0] == HEADERS and rest[-1][1] & END_STREAM


def test_a_message_over_the_limit_is_answered_resource_exhausted():
    conn = opened(max_message=1000)
    conn.feed(frame(HEADERS, END_HEADERS, 1, request_block()))
    events = conn.feed(frame(DATA, 0, 1, b"\x00" + struct.pack(">I", 1001) + b"x" * 100))
    assert events == [(EVENT_RESET, 1, b"")]
    block = RESPONSE_HEADERS + b"\x00\x0bgrpc-status\x018" + \
        b"\x00\x0cgrpc-message\x36grpc: received message larger than max (1001 vs. 1000)"
    assert frames_of(take(conn)) == [(HEADERS, END_HEADERS | END_STREAM, 1, block), (RST_STREAM, 0, 1, bytes(4))]
    assert conn.feed(frame(PING, 0, 0, b"stillok!")) == []   # the connection goes on
    assert take(conn) == frame(PING, 1, 0, b"stillok!")


def test_streams_over_the_limit_are_refused():
    conn = opened(max_streams=2)
    events = conn.feed(b"".join(frame(HEADERS, END_HEADERS, s, request_block()) for s in (1, 3, 5)))
    assert [stream for kind, stream, _ in events if kind == EVENT_HEADERS] == [1, 3]
    assert take(conn) == frame(RST_STREAM, 0, 5, struct.pack(">I", 7))   # REFUSED_STREAM


def last_goaway(conn: H2Connection) -> int:
    kind, _, _, payload = frames_of(take(conn))[-1]
    assert kind == GOAWAY
    return struct.unpack(">II", payload)[1]


@pytest.mark.parametrize("data, error, reason", [
    (b"GET / HTTP/1.1\r\n\r\n", 1, "preface"),
    (PREFACE + frame(HEADERS, END_HEADERS, 1, b"\xff\xff\x01"), 9, "HPACK"),          # index 446: no such entry
    (PREFACE + frame(HEADERS, END_HEADERS, 1, b"\x3f\xe1\x7f"), 9, "HPACK"),          # table size 16,384 > 4,096
    (PREFACE + b"\x00\x40\x01" + bytes([DATA, 0]) + b"\x00\x00\x00\x01", 6, "16385"),  # a frame over 16 KiB
    (PREFACE + frame(CONTINUATION, END_HEADERS, 1, b"\x82"), 1, "CONTINUATION"),
    (PREFACE + frame(HEADERS, 0, 1, b"\x82") + b"".join(frame(CONTINUATION, 0, 1, b"\x82" * 16384)
                                                        for _ in range(5)), 11, "header block"),
    (PREFACE + frame(PING, 0, 0, b"short"), 6, "PING"),
    (PREFACE + frame(HEADERS, END_HEADERS, 2, request_block()), 1, "stream 2"),
])
def test_protocol_errors_end_the_connection_with_a_goaway(data, error, reason):
    conn = H2Connection(100, 1 << 20, 2 << 20)
    take(conn)
    assert conn.feed(data) is None
    assert last_goaway(conn) == error
    assert reason in conn.reason
    assert conn.feed(frame(PING, 0, 0, b"12345678")) is None   # nothing more is read


def test_a_protocol_error_after_the_clients_goaway_still_gets_our_goaway():
    conn = opened()
    assert conn.feed(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0))) == []   # grpc-java's channel shutdown
    assert conn.feed(frame(PING, 0, 0, b"short")) is None
    assert take(conn) == frame(GOAWAY, 0, 0, struct.pack(">II", 0, 6))   # before: closed without a word


def test_a_graceful_shutdown_announces_the_largest_stream_then_answers_the_open_ones():
    conn = opened()
    conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
    conn.drain()
    conn.drain()                                                     # once
    assert take(conn) == frame(GOAWAY, 0, 0, struct.pack(">II", 0x7FFFFFFF, 0))
    # a stream the client opened before it read our GOAWAY is refused; stream 1 is still answered
    assert conn.feed(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block())) == []
    assert take(conn) == frame(RST_STREAM, 0, 3, struct.pack(">I", 7))
    assert conn.answers([(1, b"hi")]) == 1
    assert frames_of(take(conn))[-1] == (HEADERS, END_HEADERS | END_STREAM, 1, OK_TRAILERS)
    conn.goaway(0)                                                   # the final one names the last stream
    assert take(conn) == frame(GOAWAY, 0, 0, struct.pack(">II", 3, 0))
    conn.drain()
    assert take(conn) == b""


def test_unfinished_messages_of_a_connection_are_bounded():
    conn = H2Connection(100, 100_000, 150_000)
    take(conn)
    conn.feed(PREFACE + b"".join(frame(HEADERS, END_HEADERS, s, request_block()) for s in (1, 3)))
    chunk = b"\x00" + struct.pack(">I", 90_000) + b"x" * 16_000
    assert conn.feed(frame(DATA, 0, 1, chunk)) == []
    for _ in range(5):
        conn.feed(frame(DATA, 0, 1, b"x" * 16_000))
        conn.feed(frame(DATA, 0, 3, chunk if _ == 0 else b"x" * 16_000))
    assert conn.state()["buffered"] <= 150_000
    assert any(b"grpc-status\x018" in p for kind, _, _, p in frames_of(take(conn)) if kind == HEADERS)


def test_mutated_and_random_input_never_crashes_and_stays_bounded():
    """Seeded mutations of a valid connection's bytes (flipped bytes, cuts, splices, random frames),
    fed in random pieces: every feed returns events or None (the connection ended), never crashes,
    and what the front end holds stays inside its bounds."""
    import random
    rng = random.Random(33)
    body = grpc_message(b"m" * 300)
    requests = b"".join(frame(HEADERS, END_HEADERS, s, request_block()) + frame(DATA, END_STREAM, s, body)
                        for s in (1, 3, 5))
    valid = PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 100_000)) + requests + \
        frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000)) + frame(RST_STREAM, 0, 3, bytes(4))
    for case in range(3000):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            choice, at = rng.random(), rng.randrange(len(data))
            if choice < 0.5:
                data[at] = rng.randrange(256)
            elif choice < 0.7:
                del data[at:at + rng.randint(1, 40)]
            elif choice < 0.9:
                payload = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
                data[at:at] = frame(rng.randrange(12), rng.randrange(256), rng.randrange(8), payload)
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        conn = H2Connection(8, 4096, 8192)
        at = 24 if rng.random() < 0.5 else 0
        conn.feed(bytes(data[:at]))
        while at < len(data):
            step = rng.randint(1, 200)
            events = conn.feed(bytes(data[at:at + step]))
            at += step
            if events is None:
                break
            for kind, stream, payload in events:
                if kind == EVENT_MESSAGE:
                    assert len(payload) <= 4096
                elif kind == EVENT_HEADERS:
                    conn.answers([(stream, b"answer")])
            state = conn.state()
            assert state["open"] <= 8 and state["buffered"] <= 8192, (case, state)
        take(conn)
