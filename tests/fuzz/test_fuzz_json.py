"""Text formats off the network and out of the store: fastjson's dialect (admin bodies keyed by
objects), JSON request bodies (``protocol.json_body``, offset tables), the pop log's records,
receipt handles, transaction ids and topic attribute changes. Each decodes or is refused with the
module's declared error; what encodes decodes back to itself."""

from __future__ import annotations

import json

import pytest
from hypothesis import strategies as st

from rocketbox.cluster import fastjson_format as fj
from rocketbox.cluster import receipt_handle as rh
from rocketbox.cluster import topic_attributes as ta
from rocketbox.cluster.broker import pop_format as pf
from rocketbox.cluster.protocol import MessageQueue, ProtocolError, json_body, offset_table_from_rows, \
    offset_table_rows
from rocketbox.cluster.wire_format import Command
from tests.fuzz.budget import run_hypothesis
from tests.fuzz.strategies import json_scalars, json_text, json_values, mutated, shaped_object

_plain = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 64), 1 << 64), st.text(max_size=12),
                   st.floats(allow_nan=False, allow_infinity=False))
_object_keys = st.dictionaries(st.text(max_size=8), _plain, min_size=1, max_size=3).map(
    lambda d: fj.ObjectKey(sorted(d.items())))
_fastjson_values = st.recursive(_plain, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), _object_keys), inner, max_size=4)), max_leaves=20)


def _check_fastjson(raw: bytes) -> None:
    try:
        fj.loads(raw)
    except fj.FastjsonError:
        pass


@pytest.mark.fuzz(weight=1.0)
def test_fastjson_bodies_decode_or_are_refused_with_fastjson_error(fuzz_seconds):
    dialect = _fastjson_values.map(lambda v: fj.dumps(v).encode())
    strategy = st.one_of(json_text(), dialect, mutated(dialect))
    run_hypothesis("fastjson bodies", fuzz_seconds, strategy, _check_fastjson)


def _check_fastjson_round_trip(value) -> None:
    assert fj.loads(fj.dumps(value)) == value


@pytest.mark.fuzz(weight=0.4)
def test_fastjson_round_trips(fuzz_seconds):
    run_hypothesis("fastjson round trip", fuzz_seconds, _fastjson_values, _check_fastjson_round_trip)


# ---------------------------------------------------------------- request bodies

_offset_rows = st.lists(shaped_object({"topic": st.text(max_size=8), "brokerName": st.text(max_size=8),
                                       "queueId": st.integers(-5, 1 << 40), "offset": st.integers(-5, 1 << 70)}),
                        max_size=4)


def _check_json_body(raw: bytes) -> None:
    try:
        body = json_body(Command(0, {}, raw))
    except ProtocolError:
        return
    assert isinstance(body, dict)
    try:
        table = offset_table_from_rows(body.get("offsetTable"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return   # a body of the wrong shape: the handler answers it as malformed (answers_refusals)
    assert offset_table_from_rows(offset_table_rows(table)) == table


@pytest.mark.fuzz(weight=0.6)
def test_json_request_bodies_decode_or_are_refused_with_protocol_error(fuzz_seconds):
    shaped = shaped_object({"offsetTable": _offset_rows})
    run_hypothesis("json request bodies", fuzz_seconds, json_text(shaped), _check_json_body)


# ---------------------------------------------------------------- pop log records

_ints = st.one_of(st.integers(-5, 1 << 40), st.integers(), json_scalars)
_int_lists = st.one_of(st.lists(st.integers(-5, 1 << 40), max_size=4), json_values)
_checkpoints = shaped_object({"g": st.text(max_size=8), "t": st.text(max_size=8), "q": _ints, "r": _ints,
                              "pt": _ints, "it": _ints, "f": _ints, "o": _int_lists, "p": _int_lists,
                              "a": _int_lists})
_acks = shaped_object({"ck": _ints, "o": _ints})
_dones = shaped_object({"ck": _ints, "e": _ints,
                        "r": st.one_of(st.dictionaries(st.integers(0, 99).map(str), _ints, max_size=3), json_values)})


def _check_pop_record(value) -> None:
    kind, raw = value
    decode = {"ck": lambda b: pf.decode_checkpoint(b, 7), "ack": pf.decode_ack, "done": pf.decode_done}[kind]
    try:
        decoded = decode(raw)
    except ValueError:
        return
    if kind == "ck":
        assert pf.decode_checkpoint(pf.encode_checkpoint(decoded), 7) == decoded
    elif kind == "ack":
        assert pf.decode_ack(pf.encode_ack(*decoded)) == decoded
    else:
        ck, redeliver, end = decoded
        assert pf.decode_done(pf.encode_done(ck, redeliver, end)) == (ck, redeliver, end if redeliver else -1)


@pytest.mark.fuzz(weight=1.0)
def test_pop_log_records_decode_or_are_refused_with_value_error(fuzz_seconds):
    strategy = st.one_of(st.tuples(st.just("ck"), json_text(_checkpoints)),
                         st.tuples(st.just("ack"), json_text(_acks)),
                         st.tuples(st.just("done"), json_text(_dones)))
    run_hypothesis("pop log records", fuzz_seconds, strategy, _check_pop_record)


# ---------------------------------------------------------------- receipt handles, attributes

_names = st.text(st.characters(codec="ascii", exclude_characters=" "), min_size=1, max_size=12)
_handles = st.builds(rh.ReceiptHandle, st.integers(0, 1 << 62), st.integers(0, 1 << 62), st.integers(0, 1 << 40),
                     st.booleans(), st.integers(0, 1 << 31), st.integers(0, 1 << 62), st.integers(0, 1 << 62), _names)


def _check_receipt_handle(text) -> None:
    try:
        handle = rh.decode(text)
    except rh.InvalidReceiptHandle:
        return
    assert rh.decode(handle.encode()) == handle
    handle.expired(0)


@pytest.mark.fuzz(weight=0.6)
def test_receipt_handles_decode_or_are_refused(fuzz_seconds):
    valid = _handles.map(lambda h: h.encode())
    texts = st.one_of(valid, mutated(valid.map(str.encode)).map(lambda b: b.decode("utf-8", "replace")),
                      st.text(max_size=80), st.integers(), st.none(), st.binary(max_size=20))
    run_hypothesis("receipt handles", fuzz_seconds, texts, _check_receipt_handle)


_keys = st.sampled_from(("message.type", "queue.type", "", "a", "+", "-", "=", ",", " "))
_entries = st.builds(lambda sign, key, value: f"{sign}{key}" + (f"={value}" if value is not None else ""),
                     st.sampled_from(("+", "-", "", "++", "=")), _keys,
                     st.one_of(st.none(), st.sampled_from((*ta.MESSAGE_TYPES, ta.UNSPECIFIED, "", "x", "=")),
                               st.text(max_size=6)))
_modifications = st.one_of(st.lists(_entries, max_size=4).map(",".join), st.text(max_size=30), st.none())


def _check_attributes(value) -> None:
    text, current, creating = value
    try:
        changes = ta.parse_modification(text)
    except ta.AttributeProblem:
        return
    assert ta.parse_modification(ta.format_modification(changes)) == changes
    try:
        after = ta.apply_modification(current, changes, creating=creating)
    except ta.AttributeProblem:
        return
    declared = ta.declared_message_type(after)
    assert declared is None or declared in ta.MESSAGE_TYPES
    ta.accepted_types(declared)


@pytest.mark.fuzz(weight=0.6)
def test_topic_attribute_changes_parse_or_are_refused(fuzz_seconds):
    current = st.dictionaries(st.just(ta.MESSAGE_TYPE_KEY), st.sampled_from((*ta.MESSAGE_TYPES, ta.UNSPECIFIED)))
    run_hypothesis("topic attributes", fuzz_seconds, st.tuples(_modifications, current, st.booleans()),
                   _check_attributes)


def test_offset_rows_of_a_table_read_back():
    """The round trip the body target relies on, on a fixed table: queues and offsets kept."""
    table = {MessageQueue("T", "b", 1): 5, MessageQueue("T", "b", 0): 0}
    assert offset_table_from_rows(json.loads(json.dumps(offset_table_rows(table)))) == table
