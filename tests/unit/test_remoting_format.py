"""The remoting frame codec (cluster/remoting_format.py): golden bytes for both header
serializations, the typing rules the real clients depend on, and a stream parser fed in every
possible cut."""

from __future__ import annotations

import json
import struct

import pytest

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.wire_format import FLAG_RESPONSE, LANGUAGE_CPP, Command, FrameError

# The header of a route lookup as the C++ client 1.2.x (PyPI rocketmq 0.4.4) sends it
# (../shared/rocketmq-protocol.md §1.2).
CPP_ROUTE_LOOKUP = (b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"c2ln",'
                    b'"topic":"T"},"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}')


def _frame(header: bytes, body: bytes = b"", serialize_type: int = rf.SERIALIZE_JSON) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def test_json_response_golden_bytes():
    response = Command(0, {"msgId": "7F00000100002A9F0000000000000000", "queueId": 3, "queueOffset": 12},
                       b"", opaque=9, flag=FLAG_RESPONSE)
    header = (b'{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"3",'
              b'"queueOffset":"12"},"flag":1,"language":"PYTHON","opaque":9,"remark":null,'
              b'"serializeTypeCurrentRPC":"JSON","version":401}')
    assert rf.encode_frame(response) == struct.pack(">ii", 4 + len(header), len(header)) + header


def test_response_ext_values_are_strings_and_codes_integers():
    """The C++ client reads a response field only if it is a JSON string (a number made its
    consumer re-pull from offset 0 forever)."""
    encoded = rf.encode_json_header(Command(19, {"nextBeginOffset": 5, "minOffset": 0}, opaque=1, flag=1,
                                            remark="no new message"))
    header = json.loads(encoded)
    assert header["extFields"] == {"nextBeginOffset": "5", "minOffset": "0"}
    assert all(type(header[k]) is int for k in ("code", "opaque", "flag", "version"))
    assert header["remark"] == "no new message"


def test_cpp_request_decodes_with_its_fields():
    cmd, serialize_type = rf.decode_frame_payload(_frame(CPP_ROUTE_LOOKUP)[4:])
    assert serialize_type == rf.SERIALIZE_JSON
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version) == (105, 0, 0, LANGUAGE_CPP, 63)
    assert cmd.fields["topic"] == "T" and cmd.remark == "" and cmd.body == b""


def test_request_numbers_and_booleans_become_the_strings_handlers_read():
    header = json.dumps({"code": 10, "opaque": 3, "flag": 0, "language": "CPP", "version": 63, "extFields": {
        "queueId": 2, "sysFlag": 0, "bornTimestamp": "1795281014851", "unitMode": "0", "batch": False,
        "flag": 0.0, "absent": None}}).encode()
    cmd, _ = rf.decode_frame_payload(_frame(header, b"body")[4:])
    assert cmd.fields == {"queueId": "2", "sysFlag": "0", "bornTimestamp": "1795281014851", "unitMode": "0",
                          "batch": "false", "flag": "0"}
    assert cmd.body == b"body"


def test_binary_header_golden_bytes_and_round_trip():
    request = Command(105, {"topic": "T"}, b"", opaque=7, flag=0, remark="", language=0, version=401)
    header = (struct.pack(">hBhii", 105, 0, 401, 7, 0) + struct.pack(">i", 0)
              + struct.pack(">i", 2 + 5 + 4 + 1) + struct.pack(">H", 5) + b"topic" + struct.pack(">i", 1) + b"T")
    frame = rf.encode_frame(request, rf.SERIALIZE_ROCKETMQ)
    assert frame == struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header
    decoded, serialize_type = rf.decode_frame_payload(frame[4:])
    assert serialize_type == rf.SERIALIZE_ROCKETMQ
    assert (decoded.code, decoded.fields, decoded.opaque, decoded.version) == (105, {"topic": "T"}, 7, 401)


def _payload(header: bytes, serialize_type: int = rf.SERIALIZE_JSON, header_len: int | None = None) -> bytes:
    return struct.pack(">I", (serialize_type << 24) | (len(header) if header_len is None else header_len)) + header


@pytest.mark.parametrize("payload, reason", [
    (_payload(b"{}", serialize_type=2), "unknown serialize type 2"),
    (_payload(b"{}", header_len=40), "header length 40 runs past"),
    (_payload(b"{x}"), "not JSON"),
    (_payload(b"[]"), "not an object"),
    (_payload(b'{"code":"ten"}'), "not a 32-bit integer"),
    (_payload(b'{"code":10,"extFields":{"a":[1]}}'), "is a list"),
    (_payload(b'{"code":10,"extFields":[1]}'), "extFields is a JSON list"),
    (_payload(b'{"code":10,"flag":1e3}'), "not a 32-bit integer"),
    (_payload(b'{"code":4294967296}'), "not a 32-bit integer"),
    (_payload(b'{"code":10,"remark":5}'), "remark is not a string"),
    (_payload(b"[" * 2000 + b"]" * 2000), "depth limit"),   # found by tests/fuzz: was a RecursionError
    (_payload(b"\x00\x01", serialize_type=rf.SERIALIZE_ROCKETMQ), "shorter than"),
    (b"\x00", "no header length"),
])
def test_bad_frames_are_refused_with_a_reason(payload, reason):
    with pytest.raises(FrameError, match=reason):
        rf.decode_frame_payload(payload)


def _stream() -> tuple[bytes, list[bytes]]:
    frames = [_frame(CPP_ROUTE_LOOKUP), rf.encode_frame(Command(11, {"queueId": "0"}, b"x" * 300)),
              rf.encode_frame(Command(34, {}, b""), rf.SERIALIZE_ROCKETMQ)]
    return b"".join(frames), [f[4:] for f in frames]


def test_decoder_fed_a_byte_at_a_time():
    stream, payloads = _stream()
    decoder, got = rf.FrameDecoder(), []
    for i in range(len(stream)):
        got += decoder.feed(stream[i:i + 1])
    assert got == payloads and decoder.buffered_bytes == 0


def test_decoder_cut_at_every_byte():
    stream, payloads = _stream()
    for cut in range(len(stream) + 1):
        decoder = rf.FrameDecoder()
        got = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert got == payloads, cut


@pytest.mark.parametrize("length", [-1, 0, 3, 1025])
def test_decoder_refuses_a_length_it_cannot_trust(length):
    decoder = rf.FrameDecoder(frame_bytes_max=1024)
    with pytest.raises(rf.BadFrameLength):
        decoder.feed(struct.pack(">i", length) + b"\x00" * 8)


def test_a_zeromq_greeting_is_told_from_other_bad_lengths():
    """A ZeroMQ peer at the remoting port (cluster's door probe sends ZMTP's signature) is a wrong
    door, which the door logs plainly, not as a malformed stream."""
    decoder = rf.FrameDecoder(frame_bytes_max=1024)
    with pytest.raises(rf.BadFrameLength) as greeting:
        decoder.feed(b"\xff" + b"\x00" * 8 + b"\x7f")
    assert greeting.value.zeromq_greeting
    with pytest.raises(rf.BadFrameLength) as other:
        rf.FrameDecoder(frame_bytes_max=1024).feed(struct.pack(">i", 1025) + b"\x00" * 8)
    assert not other.value.zeromq_greeting


def test_a_bad_length_carries_the_frames_cut_before_it():
    """Found by tests/fuzz: frames that arrived whole in the same read as a bad length word were
    dropped unanswered when the door closed the connection; the refusal now hands them over."""
    stream, payloads = _stream()
    decoder = rf.FrameDecoder(frame_bytes_max=1024)
    with pytest.raises(rf.BadFrameLength) as refused:
        decoder.feed(stream + struct.pack(">i", 0) + b"\x00" * 8)
    assert refused.value.frames == payloads
