"""The request frames of both doors: RocketMQ's binary header (our 4-byte-code layout and
RocketMQ's 2-byte one), the remoting stream (length words, serialize types, JSON headers).
Every input decodes or is refused with FrameError (BadFrameLength for a stream that cannot be
resynchronised); whatever encodes decodes back to itself."""

from __future__ import annotations

import struct

import pytest
from hypothesis import strategies as st

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.wire_format import Command, FrameError, decode_header, encode_header, from_frames
from tests.fuzz.budget import run_hypothesis
from tests.fuzz.strategies import damaged, json_scalars, json_text, json_values, mutated, shaped_object

_text = st.text(max_size=40)
_fields = st.dictionaries(st.text(max_size=20), _text, max_size=6)


def _commands(code_bits: int) -> st.SearchStrategy:
    low, high = -(1 << (code_bits - 1)), (1 << (code_bits - 1)) - 1
    return st.builds(Command, code=st.integers(low, high), fields=_fields, body=st.binary(max_size=64),
                     opaque=st.integers(-(1 << 31), (1 << 31) - 1), flag=st.integers(-(1 << 31), (1 << 31) - 1),
                     remark=_text, language=st.integers(0, 255), version=st.integers(-32768, 32767))


def _same(a: Command, b: Command) -> bool:
    return (a.code, a.fields, a.opaque, a.flag, a.remark, a.language, a.version) == \
        (b.code, b.fields, b.opaque, b.flag, b.remark, b.language, b.version)


def _check_header(value) -> None:
    raw, rocketmq_layout = value
    try:
        cmd = decode_header(raw, rocketmq_layout)
    except FrameError:
        return
    again = decode_header(encode_header(cmd, rocketmq_layout), rocketmq_layout)
    assert _same(again, cmd), (cmd, again)


@pytest.mark.fuzz(weight=1.0)
@pytest.mark.parametrize("rocketmq_layout", [False, True], ids=["native-int32-code", "rocketmq-int16-code"])
def test_rpc_header_decodes_or_is_refused_with_frame_error(fuzz_seconds, rocketmq_layout):
    valid = _commands(16 if rocketmq_layout else 32).map(lambda c: encode_header(c, rocketmq_layout))
    run_hypothesis(f"rpc header ({'rocketmq' if rocketmq_layout else 'native'} layout)", fuzz_seconds,
                   st.tuples(damaged(valid), st.just(rocketmq_layout)), _check_header)


def _check_round_trip(value) -> None:
    cmd, rocketmq_layout = value
    frames = [encode_header(cmd, rocketmq_layout), cmd.body]
    back = decode_header(frames[0], rocketmq_layout)
    assert _same(back, cmd)
    if not rocketmq_layout:
        whole = from_frames(frames)
        assert _same(whole, cmd) and whole.body == cmd.body


@pytest.mark.fuzz(weight=0.5)
def test_rpc_header_round_trips(fuzz_seconds):
    strategy = st.one_of(st.tuples(_commands(32), st.just(False)), st.tuples(_commands(16), st.just(True)))
    run_hypothesis("rpc header round trip", fuzz_seconds, strategy, _check_round_trip)


def _check_frame_list(frames) -> None:
    try:
        from_frames(frames)
    except FrameError:
        pass


@pytest.mark.fuzz(weight=0.3)
def test_zeromq_frame_lists_decode_or_are_refused(fuzz_seconds):
    header = _commands(32).map(encode_header)
    run_hypothesis("zeromq frame list", fuzz_seconds, st.lists(damaged(header), max_size=4), _check_frame_list)


# ---------------------------------------------------------------- remoting

_json_headers = shaped_object({
    "code": st.one_of(st.integers(-(1 << 33), 1 << 33), st.text(max_size=12)),
    "language": st.one_of(st.sampled_from(rf.LANGUAGES), st.integers(-5, 300)),
    "version": st.integers(-(1 << 33), 1 << 33), "opaque": st.integers(-(1 << 33), 1 << 33),
    "flag": st.integers(-3, 1 << 32), "remark": st.one_of(st.none(), _text),
    "extFields": st.one_of(st.dictionaries(_text, st.one_of(json_scalars, json_values), max_size=5), json_values),
    "serializeTypeCurrentRPC": st.sampled_from(("JSON", "ROCKETMQ")),
})


def _frame(header: bytes, serialize_type: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


_remoting_frames = st.one_of(
    st.builds(_frame, json_text(_json_headers), st.just(rf.SERIALIZE_JSON), st.binary(max_size=32)),
    st.builds(_frame, _commands(16).map(lambda c: encode_header(c, True)), st.just(rf.SERIALIZE_ROCKETMQ),
              st.binary(max_size=32)),
    st.builds(lambda c, t: rf.encode_frame(c, t), _commands(16), st.sampled_from(rf.SERIALIZE_TYPES)))


def _check_stream(value) -> None:
    """Cut into arbitrary pieces, the stream yields the same frames as whole; each frame decodes
    or is refused with FrameError."""
    stream, cuts = value
    whole_decoder = rf.FrameDecoder(frame_bytes_max=1 << 20)
    try:
        whole = whole_decoder.feed(stream)
        whole_error = None
    except rf.BadFrameLength as exc:
        whole, whole_error = None, exc
    pieces_decoder = rf.FrameDecoder(frame_bytes_max=1 << 20)
    got: list[bytes] = []
    edges = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    try:
        for start, end in zip(edges, edges[1:]):
            got += pieces_decoder.feed(stream[start:end])
    except rf.BadFrameLength:
        assert whole_error is not None, "a cut stream was refused where the whole one was not"
    else:
        assert whole_error is None and got == whole
        assert pieces_decoder.buffered_bytes == whole_decoder.buffered_bytes
    for payload in got:
        try:
            cmd, serialize_type = rf.decode_frame_payload(payload)
        except FrameError:
            continue
        assert serialize_type in rf.SERIALIZE_TYPES and isinstance(cmd.body, bytes)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.fields.items())
        rf.encode_frame(cmd.response(0, cmd.fields, remark=cmd.remark), serialize_type)


@pytest.mark.fuzz(weight=1.5)
def test_remoting_stream_frames_decode_or_are_refused(fuzz_seconds):
    streams = st.lists(st.one_of(_remoting_frames, mutated(_remoting_frames)), max_size=4).map(b"".join)
    strategy = st.tuples(st.one_of(streams, mutated(streams), st.binary(max_size=256)),
                         st.lists(st.integers(0, 1 << 16), max_size=6))
    run_hypothesis("remoting frames", fuzz_seconds, strategy, _check_stream)


def _check_remoting_round_trip(value) -> None:
    cmd, serialize_type = value
    frames = rf.FrameDecoder().feed(rf.encode_frame(cmd, serialize_type))
    assert len(frames) == 1
    back, back_type = rf.decode_frame_payload(frames[0])
    assert back_type == serialize_type and back.body == cmd.body
    assert (back.code, back.fields, back.opaque, back.flag, back.remark, back.version) == \
        (cmd.code, cmd.fields, cmd.opaque, cmd.flag, cmd.remark, cmd.version)
    # JSON names the language (an ordinal past the names reads as OTHER); the binary header keeps the byte.
    named = cmd.language < len(rf.LANGUAGES) or serialize_type == rf.SERIALIZE_ROCKETMQ
    assert back.language == (cmd.language if named else rf.LANGUAGES.index("OTHER"))


@pytest.mark.fuzz(weight=0.5)
def test_remoting_frames_round_trip(fuzz_seconds):
    strategy = st.tuples(_commands(16).filter(lambda c: c.language < 256), st.sampled_from(rf.SERIALIZE_TYPES))
    run_hypothesis("remoting frame round trip", fuzz_seconds, strategy, _check_remoting_round_trip)

