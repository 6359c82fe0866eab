"""Golden bytes of the RPC header (RocketMQ's binary header serialisation) and its refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from rocketbox.cluster.wire_format import (FLAG_RESPONSE, Command, FrameError, decode_header, encode_header, from_frames,
                                 to_frames)

GOLDEN = bytes.fromhex(
    "00000069"      # code 105 (4 bytes on our ZeroMQ door)
    "03"            # language PYTHON
    "0191"          # version 401
    "00000007"      # opaque 7
    "00000000"      # flag
    "00000000"      # remark: none
    "0000000c"      # extFields: 12 bytes
    "0005" "746f706963" "00000001" "54"  # "topic" -> "T"
)


def test_golden_header_bytes():
    cmd = Command(105, {"topic": "T"}, opaque=7)
    assert encode_header(cmd) == GOLDEN
    decoded = decode_header(GOLDEN)
    assert (decoded.code, decoded.fields, decoded.opaque, decoded.flag, decoded.remark) == (105, {"topic": "T"}, 7, 0, "")


def test_rocketmq_layout_keeps_the_int16_code_and_wide_codes_need_our_door():
    cmd = Command(105, {"topic": "T"}, opaque=7)
    rocketmq = encode_header(cmd, rocketmq_layout=True)
    assert rocketmq == GOLDEN[2:]            # RocketMQSerializable: the same header with a 2-byte code
    assert decode_header(rocketmq, rocketmq_layout=True).fields == {"topic": "T"}
    pop = Command(200050, {"topic": "T"}, opaque=7)
    assert decode_header(encode_header(pop)).code == 200050
    with pytest.raises(FrameError):
        encode_header(pop, rocketmq_layout=True)


def test_response_carries_remark_and_flag():
    response = Command(11, {"topic": "T"}, opaque=9).response(17, {"a": "1"}, b"body", "no such topic")
    raw = encode_header(response)
    assert raw[11:15] == FLAG_RESPONSE.to_bytes(4, "big")
    back = from_frames(to_frames(response))
    assert (back.code, back.remark, back.body, back.opaque, back.is_response) == (17, "no such topic", b"body", 9, True)


@given(st.integers(-2**31, 2**31 - 1), st.integers(0, 2**31 - 1), st.text(max_size=50),
       st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=100), max_size=10), st.binary(max_size=200))
def test_round_trip(code, opaque, remark, fields, body):
    cmd = Command(code, fields, body, opaque, 0, remark)
    back = from_frames(to_frames(cmd))
    assert (back.code, back.fields, back.body, back.opaque, back.remark) == (code, fields, body, opaque, remark)


def test_every_truncation_is_refused_not_crashed():
    raw = encode_header(Command(310, {"a": "group", "b": "topic"}, remark="r"))
    for cut in range(len(raw)):
        with pytest.raises(FrameError):
            decode_header(raw[:cut])


def test_bad_lengths_and_frame_counts_are_refused():
    with pytest.raises(FrameError):
        decode_header(GOLDEN[:13] + (2**31 - 1).to_bytes(4, "big"))
    with pytest.raises(FrameError):
        from_frames([])
    with pytest.raises(FrameError):
        from_frames([GOLDEN, b"", b"extra"])
