"""The native reput dispatch (scan -> extract -> IndexFile + ConsumeQueue entries in C)
against the Python path it replaces: the same files, byte for byte, on the same CommitLog."""

from __future__ import annotations

import os
import random
import shutil
import struct

import pytest

from rocketbox.cluster import _native as native
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import encode_properties
from rocketbox.cluster.message.sysflags import (SYSFLAG_MULTI_TAGS, SYSFLAG_TRANSACTION_COMMIT,
                                                SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.message.tags import java_string_hash, tag_hash_code
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.indexfile_format import key_hash
from rocketbox.cluster.shm.queue_writer import QueueWriter
from rocketbox.cluster.shm.reput import Dispatcher, ReputService
from rocketbox.cluster.shm.store import MessageStore, MessageToStore
from tests.store_harness import BORN_HOST, STORE_HOST, message, tiny_config

# Tags and keys whose Java hashes (over UTF-16 code units: surrogate pairs, the last BMP and
# plane code points, long texts) the C dispatch must compute as Python does.
TEXTS = ["a", "TagA", "topic#7F000001ABCD1234", "主题", "标签-中文", "emoji\U0001F600x", "\u00e9\u00e8",
         "\uffff", "\U0010FFFF", "x" * 300, "日本語" * 100]
# Not UTF-8 (overlong, surrogate, beyond U+10FFFF, cut short, bad continuation): such a row goes through Python.
INVALID_UTF8 = [b"\xff", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf0\x80\x80\x80",
                b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"abc\xe4\xb8", b"\xe4\x01\xad", b"\x80"]


def _raw_message(properties: bytes, sys_flag: int = 0, body: bytes = b"body") -> MessageToStore:
    return MessageToStore(body=body, flag=0, properties=properties, sys_flag=sys_flag,
                          born_timestamp_ms=1_700_000_000_000, born_host=BORN_HOST)


def _messages(rng: random.Random, n: int) -> list[MessageToStore]:
    out = []
    for i in range(n):
        kind = rng.randrange(16)
        sys_flag = rng.choice([0, 0, 0, 0, SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_COMMIT,
                               SYSFLAG_TRANSACTION_ROLLBACK, SYSFLAG_MULTI_TAGS])
        body = bytes([65 + i % 26]) * rng.randrange(1, 300)
        uniq = f"7F000001ABCD{i:020X}"
        if kind == 0:
            m = message(body, uniq=uniq)
        elif kind == 1:
            m = message(body, tags=f"tag{i % 5}", uniq=uniq)
        elif kind == 2:
            m = message(body, tags="", keys="", uniq="")
        elif kind == 3:
            m = message(body, tags="标签", keys=f"  order-{i}  customer-{i % 7} 键{i} ", uniq=uniq)
        elif kind == 4:
            m = message(body, tags="emoji\U0001F600", keys="\U0001F600", uniq=uniq)
        elif kind == 5:  # invalid UTF-8 in the tag: the row goes through Python
            m = _raw_message(b"TAGS\x01bad\xff\xfe\x02UNIQ_KEY\x01" + uniq.encode() + b"\x02", sys_flag)
        elif kind == 6:  # invalid UTF-8 in a key
            m = _raw_message(b"KEYS\x01ok k\xc0\x80y\x02UNIQ_KEY\x01" + uniq.encode() + b"\x02", sys_flag)
        elif kind == 7:  # duplicates (the last wins), a pair without \x01, empty pairs, no final \x02
            m = _raw_message(b"TAGS\x01first\x02\x02TAGS\x01second\x02KEYS\x02KEYS\x01a b\x02\x02UNIQ_KEY\x01"
                             + uniq.encode(), sys_flag)
        elif kind == 8:  # a value holding \x01, names that only look alike
            m = _raw_message(b"TAGS\x01a\x01b\x02TAGSX\x01no\x02UNIQ_KEYS\x01no\x02 KEYS\x01no\x02", sys_flag)
        elif kind == 9:
            m = message(body)
        elif kind == 10:  # many keys
            m = message(body, tags="t", keys=" ".join(f"k{i}-{j}" for j in range(rng.randrange(1, 40))),
                        uniq=uniq)
        elif kind == 11:  # invalid UTF-8 elsewhere (not a value reput reads): stays native
            m = _raw_message(b"OTHER\x01\xff\xff\x02TAGS\x01x\x02UNIQ_KEY\x01" + uniq.encode() + b"\x02", sys_flag)
        elif kind == 12:
            m = message(body, tags=rng.choice(TEXTS), keys=" ".join(rng.sample(TEXTS, 3)), uniq=uniq)
        elif kind == 13:
            bad = rng.choice(INVALID_UTF8)
            m = _raw_message(rng.choice([b"TAGS\x01", b"KEYS\x01"]) + bad + b"\x02UNIQ_KEY\x01" + uniq.encode()
                             + b"\x02", sys_flag)
        else:
            m = message(body, tags="TagA", keys=f"k{i}", uniq=uniq, extra="v")
        if m.sys_flag != sys_flag:
            m = m._replace(sys_flag=sys_flag)
        out.append(m)
    return out


def _fill_store(store_dir, cfg_overrides, seed: int, batches: int) -> int:
    cfg = tiny_config(store_dir, **cfg_overrides)
    os.makedirs(store_dir, exist_ok=True)
    control = ControlBlock(os.path.join(store_dir, "control"))
    store = MessageStore(cfg, control, store_host=STORE_HOST)
    store.recover()
    control.dispatched_pos = 0  # nothing dispatched: the services below do it all
    store.writer._topic_bytes["BadTopic"] = b"Bad\xffTopic"  # a topic that is not UTF-8 (written raw)
    rng = random.Random(seed)
    topics = ["T", "主题", "Topic-B", "BadTopic"]
    for _ in range(batches):
        topic = rng.choice(topics)
        result = store.put_messages(topic, rng.randrange(3), _messages(rng, rng.randrange(1, 40)))
        assert result.status.name == "PUT_OK", result
    end = control.write_pos
    control.queued_pos = end   # as if the broker had written the ConsumeQueue: the services below redo it
    store.close()
    control.close()
    return end


def _files(root: str) -> list[bytes]:
    """Contents of every file under root, in path order (index file names carry their creation time)."""
    out = []
    for dirpath, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            with open(os.path.join(dirpath, name), "rb") as f:
                out.append((os.path.relpath(dirpath, root) if "consumequeue" in root else "", f.read()))
    return out


def _dispatch(store_dir, cfg_overrides, *, use_native: bool, native_rows: int, steps) -> list:
    cfg = tiny_config(store_dir, **cfg_overrides)
    control = ControlBlock(os.path.join(store_dir, "control"))
    service = ReputService(cfg, control)
    service.dispatcher = Dispatcher(service.cqs, service.index, native_rows=native_rows, use_native=use_native)
    assert (service.dispatcher._batch is not None) == use_native
    reports = []
    rng = random.Random(7)
    while True:
        report = service.step(rng.choice(steps))
        assert report.problem is None
        reports.append(report)
        if report.count == 0:
            break
    total = sum(r.count for r in reports)
    touched = frozenset().union(*(r.touched for r in reports))
    end = control.dispatched_pos
    service.close()
    control.close()
    return [total, touched, end]


@pytest.mark.parametrize("seed,overrides,native_rows,steps", [
    (1, {}, 4096, [4096]),
    (2, {}, 7, [1, 5, 100, 1000]),
    (3, {"index_slot_count": 7, "index_entry_count_max": 50, "consumequeue_entries_per_file": 5}, 13, [3, 64]),
    (4, {"commitlog_file_size_bytes": 16 * 1024}, 4096, [50, 4096]),
])
def test_native_dispatch_writes_the_same_files_as_python(tmp_path, seed, overrides, native_rows, steps):
    a, b = str(tmp_path / "native"), str(tmp_path / "python")
    end = _fill_store(a, overrides, seed, batches=60)
    shutil.copytree(a, b)
    got_native = _dispatch(a, overrides, use_native=True, native_rows=native_rows, steps=steps)
    got_python = _dispatch(b, overrides, use_native=False, native_rows=native_rows, steps=[4096])
    assert got_native == got_python and got_native[2] == end
    for sub in ("consumequeue", "index"):
        native_files, python_files = _files(os.path.join(a, sub)), _files(os.path.join(b, sub))
        assert len(native_files) == len(python_files) and native_files, sub
        assert native_files == python_files, sub
    if "index_entry_count_max" in overrides:
        assert len(os.listdir(os.path.join(a, "index"))) > 2  # rolled over several index files


@pytest.mark.parametrize("seed,native_rows", [(5, 4096), (6, 7)])
def test_the_brokers_queue_entries_and_the_reputs_index_are_the_whole_dispatch(tmp_path, seed, native_rows):
    """The route at run time (the broker's QueueWriter: ConsumeQueue only, then the reput worker:
    IndexFile only, up to queued_pos) writes the files one whole dispatch (recovery's) writes."""
    a, b = str(tmp_path / "split"), str(tmp_path / "whole")
    overrides = {"consumequeue_entries_per_file": 5}
    end = _fill_store(a, overrides, seed, batches=40)
    shutil.copytree(a, b)
    cfg = tiny_config(a, **overrides)
    control = ControlBlock(os.path.join(a, "control"))
    control.queued_pos = 0
    reput = ReputService(cfg, control)
    assert reput.step(4096).count == 0   # nothing has ConsumeQueue entries yet: nothing to index
    commitlog = CommitLog(cfg)
    commitlog.set_write_pos(end)   # the broker's own log knows its end
    queues = QueueWriter(cfg, control, commitlog, ConsumeQueueSet(cfg))
    queues.dispatcher = Dispatcher(queues.dispatcher.cqs, None, native_rows=native_rows, build_index=False)
    queues.catch_up()
    assert control.queued_pos == queues.queued_pos == end and queues.take_touched()
    assert not os.listdir(os.path.join(a, "index"))
    while reput.step(100).count:
        pass
    assert control.dispatched_pos == end
    reput.close()
    commitlog.close()
    control.close()
    _dispatch(b, overrides, use_native=False, native_rows=4096, steps=[4096])
    for sub in ("consumequeue", "index"):
        split_files, whole_files = _files(os.path.join(a, sub)), _files(os.path.join(b, sub))
        assert split_files and split_files == whole_files, sub


def test_native_dispatch_resumes_after_a_partial_python_index(tmp_path):
    """A restart from an older cursor: records already indexed (by either path) are skipped."""
    a, b = str(tmp_path / "native"), str(tmp_path / "python")
    _fill_store(a, {}, 11, batches=30)
    shutil.copytree(a, b)
    cfg = tiny_config(a)
    control = ControlBlock(os.path.join(a, "control"))
    half = ReputService(cfg, control)
    half.dispatcher = Dispatcher(half.cqs, half.index, use_native=False)
    half.step(150)
    half.close()
    control.dispatched_pos = 0  # the worker died before publishing: all again, natively
    control.close()
    _dispatch(a, {}, use_native=True, native_rows=64, steps=[100])
    _dispatch(b, {}, use_native=False, native_rows=64, steps=[4096])
    assert _files(os.path.join(a, "index")) == _files(os.path.join(b, "index"))
    assert _files(os.path.join(a, "consumequeue")) == _files(os.path.join(b, "consumequeue"))


def _encoded(records) -> bytes:
    out = bytearray()
    for topic, props, sys_flag, queue_id, queue_offset in records:
        out += fmt.encode(queue_id=queue_id, flag=0, queue_offset=queue_offset, phys_offset=len(out),
                          sys_flag=sys_flag, born_timestamp_ms=1, born_host=BORN_HOST,
                          store_timestamp_ms=2, store_host=STORE_HOST, reconsume_times=0,
                          prepared_transaction_offset=0, body=b"x", topic=topic, properties=props)
    return bytes(out)


def test_extract_columns_and_runs():
    props = encode_properties({"TAGS": "A", "UNIQ_KEY": "u", "KEYS": "k1  k2"})
    buf = _encoded([
        (b"T", props, 0, 0, 0), (b"T", props, 0, 0, 1),                 # one run
        (b"T", props, SYSFLAG_TRANSACTION_PREPARED, 0, 0),           # no CQ entry
        (b"T", props, 0, 0, 2), (b"T", props, 0, 1, 0),                  # the run goes on; another queue
        (b"U", props, 0, 1, 1),                                          # another topic: new run
        (b"U", props, 0, 1, 3),                                          # offset gap: new run
        (b"U", b"TAGS\x01\xff\x02", 0, 1, 4),                            # Python's row
        (b"U", props, SYSFLAG_TRANSACTION_ROLLBACK, 1, 0),           # nothing at all
    ])
    batch = native.DispatchBatch(16)
    n, next_pos, stop = batch.scan(buf, 0, len(buf))
    assert (n, next_pos, stop) == (9, len(buf), native.SCAN_END)
    run_count = batch.extract(buf)
    assert batch.count == 9
    assert list(batch.runs[:3 * run_count]) == [0, 3, 3, 4, 1, 4, 5, 1, 5, 6, 1, 6]
    assert list(batch.next_in_run[:9]) == [1, 3] + [-1] * 7
    info = [batch.info[i * native.DISPATCH_COLUMNS:(i + 1) * native.DISPATCH_COLUMNS] for i in range(9)]
    cq_index = native.DISPATCH_CQ | native.DISPATCH_INDEX
    assert [row[native.DCOL_FLAGS] for row in info] == [cq_index] * 2 + [native.DISPATCH_INDEX] + [cq_index] * 4 + [
        cq_index | native.DISPATCH_PYTHON, 0]
    assert info[0][native.DCOL_TAG_HASH] == tag_hash_code("A")
    assert [info[i][native.DCOL_KEY_COUNT] for i in range(9)] == [3] * 7 + [0, 0]
    first = info[5][native.DCOL_KEY_FIRST]
    assert list(batch.key_hashes[first:first + 3]) == [key_hash("U#u"), key_hash("U#k1"), key_hash("U#k2")]


def test_extract_does_only_the_work_of_the_entries_its_caller_writes():
    """The broker's queue writer wants ConsumeQueue entries only: no key is hashed, a key that is
    not valid UTF-8 sends no row to Python. The reput worker wants IndexFile entries only: no tag
    is hashed, no run is built, a tag that is not valid UTF-8 sends no row to Python."""
    props = encode_properties({"TAGS": "A", "UNIQ_KEY": "u", "KEYS": "k1"})
    buf = _encoded([(b"T", props, 0, 0, 0), (b"T", props, 0, 0, 1),
                    (b"T", b"KEYS\x01\xff\x02", 0, 0, 2), (b"T", b"TAGS\x01\xff\x02", 0, 0, 3)])
    queues = native.DispatchBatch(8, native.DISPATCH_CQ)
    queues.scan(buf, 0, len(buf))
    run_count = queues.extract(buf)
    info = [queues.info[i * native.DISPATCH_COLUMNS:(i + 1) * native.DISPATCH_COLUMNS] for i in range(4)]
    assert [row[native.DCOL_FLAGS] for row in info] == [native.DISPATCH_CQ] * 3 + [
        native.DISPATCH_CQ | native.DISPATCH_PYTHON]
    assert [row[native.DCOL_KEY_COUNT] for row in info] == [0] * 4
    assert info[0][native.DCOL_TAG_HASH] == tag_hash_code("A")
    assert list(queues.runs[:3 * run_count]) == [0, 3, 2]
    index = native.DispatchBatch(8, native.DISPATCH_INDEX)
    index.scan(buf, 0, len(buf))
    assert index.extract(buf) == 0
    info = [index.info[i * native.DISPATCH_COLUMNS:(i + 1) * native.DISPATCH_COLUMNS] for i in range(4)]
    assert [row[native.DCOL_FLAGS] for row in info] == [native.DISPATCH_INDEX] * 2 + [
        native.DISPATCH_INDEX | native.DISPATCH_PYTHON, native.DISPATCH_INDEX]
    assert [row[native.DCOL_TAG_HASH] for row in info] == [0] * 4
    assert [row[native.DCOL_KEY_COUNT] for row in info] == [2, 2, 0, 0]
    with pytest.raises(ValueError):
        native.DispatchBatch(8, 8).extract(buf)


def test_key_hash_of_min_int_is_zero():
    """Java's abs(Integer.MIN_VALUE) stays negative; RocketMQ stores 0. Build a key hashing there."""
    target = 1 << 31  # -2^31 as an unsigned 32-bit value
    prefix = java_string_hash("p#") & 0xFFFFFFFF
    rng = random.Random(5)
    uniq = None
    while uniq is None:  # six random characters (enough to wrap), the seventh solves (~1 in 80k)
        chars = [rng.randrange(0x100, 0xD800) for _ in range(6)]
        h = prefix
        for c in chars:
            h = (31 * h + c) % (1 << 32)
        last = (target - 31 * h) % (1 << 32)
        if 0x100 <= last < 0xD800:
            uniq = "".join(map(chr, chars + [last]))
    assert java_string_hash("p#" + uniq) == -(1 << 31) and key_hash("p#" + uniq) == 0
    buf = _encoded([(b"p", encode_properties({"UNIQ_KEY": uniq}), 0, 0, 0)])
    batch = native.DispatchBatch(4)
    batch.scan(buf, 0, len(buf))
    batch.extract(buf)
    assert batch.info[native.DCOL_KEY_COUNT] == 1 and batch.key_hashes[0] == 0


def test_runs_follow_each_queue_through_interleaved_rows():
    """A producer round-robins over queues: each queue's rows are one run wherever they lie, and
    its entries are written along it; a Python row ends the runs open before it."""
    props = encode_properties({"TAGS": "A"})
    records = [(b"T", props, 0, i % 3, i // 3) for i in range(9)]       # q0 q1 q2 q0 q1 q2 ...
    records.append((b"T", b"TAGS\x01\xff\x02", 0, 0, 3))               # Python's row for q0
    records.append((b"T", props, 0, 0, 4))                              # q0 again: a new run
    buf = _encoded(records)
    batch = native.DispatchBatch(16)
    assert batch.scan(buf, 0, len(buf))[0] == 11
    run_count = batch.extract(buf)
    assert list(batch.runs[:3 * run_count]) == [0, 3, 6, 1, 3, 7, 2, 3, 8, 10, 1, 10]
    assert batch.run_rows(1) == [1, 4, 7] and batch.run_rows(0, below=4) == [0, 3]
    entries = bytearray(20 * 4)
    assert batch.cq_put(entries, 20, 1, 2, 1000) == 7          # two entries of q1; row 7 is next
    assert batch.cq_put(entries, 60, 7, 1, 1000) == -1
    for slot, row in zip((1, 2, 3), (1, 4, 7)):
        start, total_size = batch.rows[row * native.SCAN_COLUMNS:row * native.SCAN_COLUMNS + 2]
        assert struct.unpack_from(">qiq", entries, 20 * slot) == (1000 + start, total_size, tag_hash_code("A"))
    assert entries[:20] == bytes(20)
    with pytest.raises(ValueError):   # the run has no fourth row: nothing is written
        batch.cq_put(bytearray(80), 0, 1, 4, 0)
