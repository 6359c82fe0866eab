"""The store's byte formats, in Python and in the C helper alike: batch bodies (a producer's
batch becomes records), CommitLog records (decode_at and the native scan), message properties
(decoded in Python, and by the reput dispatch in C and in Python, which must write the same
ConsumeQueue and IndexFile bytes). A native crash would take the whole pytest process down: that
is a failure too."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import strategies as st

from rocketbox.cluster import _native as native
from rocketbox.cluster.format_errors import DestinationTooSmall, MalformedBatch
from rocketbox.cluster.message import batch_format
from rocketbox.cluster.message.properties import decode_properties, encode_properties
from rocketbox.cluster.message.sysflags import (SYSFLAG_MULTI_TAGS, SYSFLAG_TRANSACTION_COMMIT,
                                                SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm import commitlog_format
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.reput import Dispatcher, ReputService
from rocketbox.cluster.shm.store import MessageStore, MessageToStore
from tests.fuzz.budget import run_hypothesis
from tests.fuzz.strategies import damaged
from tests.store_harness import BORN_HOST, STORE_HOST, tiny_config

_i32 = st.integers(-(1 << 31), (1 << 31) - 1)
_i64 = st.integers(-(1 << 63), (1 << 63) - 1)
# Property texts as clients write them and as they should not: separators in odd places, names
# the dispatch reads (TAGS, KEYS, UNIQ_KEY, delay), non-UTF-8 and NUL bytes.
_property_names = st.one_of(st.sampled_from((b"TAGS", b"KEYS", b"UNIQ_KEY", b"DELAY", b"TIMER_DELIVER_MS", b"a")),
                            st.binary(max_size=6))
_property_values = st.one_of(st.sampled_from((b"", b" ", b"a b  c", b"\xff", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80",
                                              b"x" * 300, b"-1", b"99999999999999999999")), st.binary(max_size=12),
                             st.text(max_size=12).map(str.encode))
_property_pairs = st.lists(st.tuples(_property_names, st.sampled_from((b"\x01", b"", b"\x01\x01")), _property_values,
                                     st.sampled_from((b"\x02", b"", b"\x02\x02"))), max_size=6)
properties_bytes = st.one_of(_property_pairs.map(lambda pairs: b"".join(b"".join(p) for p in pairs)),
                             st.binary(max_size=40))


# ---------------------------------------------------------------- properties

_clean_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=10)


def _check_properties(value) -> None:
    raw, clean = value
    decoded = decode_properties(raw)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in decoded.items())
    assert decode_properties(encode_properties(clean)) == clean


@pytest.mark.fuzz(weight=0.5)
def test_message_properties_decode_and_round_trip(fuzz_seconds):
    clean = st.dictionaries(_clean_text.filter(bool), _clean_text, max_size=5)
    run_hypothesis("message properties", fuzz_seconds, st.tuples(properties_bytes, clean), _check_properties)


# ---------------------------------------------------------------- batch bodies

_items = st.lists(st.tuples(_i32, st.binary(max_size=40), properties_bytes.filter(lambda p: b"\x00" not in p)),
                  max_size=5)
_batches = _items.map(batch_format.encode_items)


def _outcome(call):
    try:
        return call()
    except (MalformedBatch, DestinationTooSmall, ValueError) as exc:
        return type(exc)


def _check_batch(value) -> None:
    """Python and C read a batch alike: both refuse it with the same error, or both write the same records."""
    batch, topic, room = value
    measured = _outcome(lambda: batch_format.measure_batch(batch, len(topic)))
    assert measured == _outcome(lambda: native.measure_batch(batch, len(topic)))
    args = (batch, topic, 3, 100, 5000, 0, 1_700_000_000_000, BORN_HOST, 1_700_000_000_001, STORE_HOST)
    dst_py, dst_c = bytearray(room + 16), bytearray(room + 16)
    by_python = _outcome(lambda: batch_format.encode_batch(dst_py, 8, *args, dst_limit=8 + room))
    by_c = _outcome(lambda: native.encode_batch(dst_c, 8, *args, dst_limit=8 + room))
    if isinstance(by_python, type):
        assert by_c == by_python and not any(dst_c)
    else:
        assert (by_c[0], by_c[1], list(by_c[2])) == (by_python[0], by_python[1], list(by_python[2]))
        assert dst_c == dst_py
        for rec in fmt.iter_records(memoryview(dst_py)[8:8 + by_python[0]], check_crc=True):
            assert rec.topic.encode("utf-8", "replace") == topic or not topic.isascii()


@pytest.mark.fuzz(weight=1.0)
def test_batch_bodies_are_read_alike_by_python_and_c(fuzz_seconds):
    topic = st.one_of(st.binary(max_size=10), st.just(b"t" * 127), st.just(b"t" * 128))
    strategy = st.tuples(damaged(_batches), topic, st.one_of(st.just(1 << 16), st.integers(0, 2000)))
    run_hypothesis("batch bodies", fuzz_seconds, strategy, _check_batch)


def _check_batch_round_trip(items) -> None:
    assert batch_format.decode_items(batch_format.encode_items(items)) == [batch_format.BatchItem(*i) for i in items]


@pytest.mark.fuzz(weight=0.3)
def test_batch_bodies_round_trip(fuzz_seconds):
    run_hypothesis("batch body round trip", fuzz_seconds, _items, _check_batch_round_trip)


# ---------------------------------------------------------------- CommitLog records

_records = st.builds(
    lambda f: fmt.encode(**f),
    st.fixed_dictionaries({
        "queue_id": _i32, "flag": _i32, "queue_offset": _i64, "phys_offset": _i64, "sys_flag": _i32,
        "born_timestamp_ms": _i64, "born_host": st.binary(min_size=8, max_size=8), "store_timestamp_ms": _i64,
        "store_host": st.binary(min_size=8, max_size=8), "reconsume_times": _i32,
        "prepared_transaction_offset": _i64, "body": st.binary(max_size=40), "topic": st.binary(max_size=12),
        "properties": properties_bytes}))
_blank = st.integers(0, 64).map(lambda n: commitlog_format.BLANK_HEAD.pack(8 + n, commitlog_format.BLANK_MAGIC_SIGNED) + bytes(n))
_logs = st.lists(st.one_of(_records, _records, _blank), max_size=5).map(b"".join)


def _python_walk(buf: bytes, start: int, end: int, check_crc: bool):
    pos, rows = start, []
    while True:
        if pos == end:
            return rows, pos, native.SCAN_END
        item = commitlog_format.decode_segment_at(buf, pos, end, check_crc=check_crc)
        if type(item) is fmt.Record:
            rows.append((pos, item))
            pos += item.total_size
            continue
        stop = {commitlog_format.EndOfFile: native.SCAN_BLANK, fmt.Incomplete: native.SCAN_INCOMPLETE,
                fmt.Corrupt: native.SCAN_CORRUPT}[type(item)]
        return rows, pos, stop


def _check_scan(value) -> None:
    """decode_segment_at walks a log as the native scan does: the same records, fields and stop."""
    buf, start, cut, check_crc = value
    start = min(start, len(buf))
    end = max(start, len(buf) - cut)
    rows, next_pos, stop = _python_walk(buf, start, end, check_crc)
    scan = native.scan_records(buf, start, end, max_rows=64, check_crc=check_crc)
    if scan.stop == native.SCAN_LIMIT:
        rows = rows[:64]
        next_pos = rows[-1][0] + rows[-1][1].total_size
    else:
        assert scan.stop == stop, (scan, stop)
    assert scan.next_pos == next_pos and scan.count == len(rows)
    for row, (pos, rec) in zip(scan.records(), rows):
        assert (row.pos, row.total_size, row.queue_id, row.queue_offset, row.phys_offset, row.sys_flag,
                row.store_timestamp_ms) == (pos, rec.total_size, rec.queue_id, rec.queue_offset, rec.phys_offset,
                                            rec.sys_flag, rec.store_timestamp_ms)
        assert buf[row.body_pos:row.body_pos + row.body_len] == rec.body
        assert buf[row.properties_pos:row.properties_pos + row.properties_len] == rec.properties_raw
    batch = native.DispatchBatch(16)
    count, _, _ = batch.scan(buf, start, end)
    batch.extract(buf, count)
    assert 0 <= batch.count <= count


@pytest.mark.fuzz(weight=1.5)
def test_commitlog_records_decode_alike_in_python_and_c(fuzz_seconds):
    strategy = st.tuples(damaged(_logs), st.one_of(st.just(0), st.integers(0, 300)),
                         st.one_of(st.just(0), st.integers(0, 64)), st.booleans())
    run_hypothesis("commitlog records", fuzz_seconds, strategy, _check_scan)


def _check_record_round_trip(raw: bytes) -> None:
    rec = fmt.decode_at(raw, 0)
    assert type(rec) is fmt.Record and rec.total_size == len(raw)
    assert fmt.encode(queue_id=rec.queue_id, flag=rec.flag, queue_offset=rec.queue_offset,
                      phys_offset=rec.phys_offset, sys_flag=rec.sys_flag, born_timestamp_ms=rec.born_timestamp_ms,
                      born_host=rec.born_host, store_timestamp_ms=rec.store_timestamp_ms, store_host=rec.store_host,
                      reconsume_times=rec.reconsume_times, prepared_transaction_offset=rec.prepared_transaction_offset,
                      body=rec.body, topic=raw[fmt.HEAD_SIZE + len(rec.body) + 1:][:raw[fmt.HEAD_SIZE + len(rec.body)]],
                      properties=rec.properties_raw) == raw


@pytest.mark.fuzz(weight=0.3)
def test_commitlog_records_round_trip(fuzz_seconds):
    run_hypothesis("commitlog record round trip", fuzz_seconds, _records, _check_record_round_trip)


# ---------------------------------------------------------------- reput dispatch, C against Python

_messages = st.lists(st.builds(
    lambda props, sys_flag, body: MessageToStore(body=body, flag=0, properties=props, sys_flag=sys_flag,
                                                 born_timestamp_ms=1_700_000_000_000, born_host=BORN_HOST),
    properties_bytes.filter(lambda p: b"\x00" not in p),
    st.sampled_from((0, SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_COMMIT,
                     SYSFLAG_TRANSACTION_ROLLBACK, SYSFLAG_MULTI_TAGS)),
    st.binary(min_size=1, max_size=8)), min_size=1, max_size=12)
_topics = st.sampled_from(("T", "主题", "SCHEDULE_TOPIC_XXXX", "t" * 127))


def _dispatched_files(store_dir: str, use_native: bool) -> list:
    cfg = tiny_config(store_dir, index_slot_count=7, index_entry_count_max=20, consumequeue_entries_per_file=5)
    control = ControlBlock(os.path.join(store_dir, "control"))
    service = ReputService(cfg, control)
    service.dispatcher = Dispatcher(service.cqs, service.index, native_rows=5, use_native=use_native)
    try:
        while True:
            report = service.step(7)
            assert report.problem is None, report.problem
            if report.count == 0:
                break
    finally:
        service.close()
        control.close()
    files = []
    for sub in ("consumequeue", "index"):
        for dirpath, _, names in sorted(os.walk(os.path.join(store_dir, sub))):
            for name in sorted(names):
                with open(os.path.join(dirpath, name), "rb") as f:
                    files.append((os.path.relpath(dirpath, store_dir) if sub == "consumequeue" else sub, f.read()))
    return files


def _check_dispatch(value) -> None:
    topic, queue_id, messages = value
    with tempfile.TemporaryDirectory(prefix="fuzz-dispatch-") as root:
        a, b = os.path.join(root, "c"), os.path.join(root, "python")
        cfg = tiny_config(a, index_slot_count=7, index_entry_count_max=20, consumequeue_entries_per_file=5)
        os.makedirs(a)
        control = ControlBlock(os.path.join(a, "control"))
        store = MessageStore(cfg, control, store_host=STORE_HOST)
        store.recover()
        control.dispatched_pos = 0
        try:
            result = store.put_messages(topic, queue_id, messages)
        finally:
            store.close()
            control.close()
        if result.status.name != "PUT_OK":
            return
        shutil.copytree(a, b)
        assert _dispatched_files(a, use_native=True) == _dispatched_files(b, use_native=False)


@pytest.mark.fuzz(weight=2.0)
def test_reput_dispatch_of_any_properties_is_the_same_in_c_and_python(fuzz_seconds):
    strategy = st.tuples(_topics, st.integers(0, 20), _messages)
    run_hypothesis("reput dispatch (properties)", fuzz_seconds, strategy, _check_dispatch)

