"""Flush, reput and allocate services, stepped by hand as their worker loops would."""

import errno
import os

from rocketbox.cluster.shm import checkpoint
from rocketbox.cluster.message.properties import encode_properties
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm import mapped_file
from rocketbox.cluster.shm.allocate import AllocateService
from rocketbox.cluster.message.tags import tag_hash_code
from tests.store_harness import Harness, message, tiny_config

SEG = 64 * 1024


def test_flush_publishes_flushed_pos_and_checkpoint(tmp_path):
    h = Harness(tiny_config(tmp_path))
    h.store.put_messages("T", 0, [message(b"a" * 100)] * 3)
    assert h.control.flushed_pos == 0
    assert h.flush.step() == h.control.write_pos
    assert h.control.flushed_pos == h.control.write_pos
    assert h.flush.step() == h.control.write_pos  # nothing new: the same position
    assert h.control.heartbeat_flush_ms > 0
    h.reput.step(2)
    dispatched = h.control.dispatched_pos
    cp = h.flush.step_logics()
    assert cp.dispatched_flushed_pos == dispatched
    assert cp.commitlog_flushed_pos == h.control.write_pos
    assert checkpoint.read(str(tmp_path)) == cp
    h.close()


def test_queue_entries_then_the_index_across_blanks(tmp_path):
    h = Harness(tiny_config(tmp_path))
    big = b"b" * 20_000
    for i in range(6):  # three fit in a segment: crosses an end-of-file blank
        h.store.put_messages("T", i % 2, [message(big, tags="TagA")])
    h.store.put_messages("U", 5, [message(b"small")])
    assert h.reput.step(100).count == 0   # the reput indexes behind the broker's ConsumeQueue entries
    assert h.store.write_queue_entries() == {("T", 0), ("T", 1), ("U", 5)}
    assert h.control.queued_pos == h.control.write_pos and h.store.write_queue_entries() == set()
    report = h.reput.step(4)
    assert report.count == 4 and report.touched == frozenset()   # it writes no ConsumeQueue entry
    report = h.reput.step(100)
    assert report.count == 3 and report.problem is None
    assert report.dispatched_pos == h.control.dispatched_pos == h.control.write_pos
    assert h.reput.step(100).count == 0
    cq = h.store.cqs.get("T", 1)
    phys, size, tag = cq.get(2)
    assert tag == tag_hash_code("TagA") and size == fmt.record_size(len(big), 1, len(
        fmt.stored_properties(encode_properties({"TAGS": "TagA"}), record_crc=True)))
    assert phys > SEG  # the sixth record went to the second segment
    h.close()


def test_corruption_stops_the_queue_entries_and_the_index_there(tmp_path, caplog):
    h = Harness(tiny_config(tmp_path))
    r = h.store.put_messages("T", 0, [message(b"ok"), message(b"bad")])
    second = r.phys_offset + fmt.record_size(2, 1, fmt.RECORD_CRC_SIZE)
    seg = os.path.join(tmp_path, "commitlog", f"{0:020d}")
    with open(seg, "r+b") as f:
        f.seek(second + fmt.OFF_MAGIC)
        f.write(b"\0\0\0\1")
    assert h.store.write_queue_entries() == {("T", 0)}
    assert h.control.queued_pos == second and "ConsumeQueue entries stopped at" in caplog.text
    assert h.store.max_offset("T", 0) == 1   # the record before it is readable
    report = h.reput.step(10)
    assert report.count == 1 and report.dispatched_pos == second
    assert h.reput.step(10).count == 0
    # The reput reports what it cannot read itself (a queue writer that went on would not protect it).
    h.control.queued_pos = h.control.write_pos
    report = h.reput.step(10)
    assert report.count == 0 and report.dispatched_pos == second and "cannot read" in report.problem
    h.close()


def test_allocate_creates_next_segment_ahead(tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path, preheat_enabled=True)
    h = Harness(cfg)
    alloc = AllocateService(cfg, h.control, preheat_chunk_bytes=16 * 1024)
    report = alloc.step()
    assert report.created_start == SEG and report.preheated_bytes == 16 * 1024
    assert os.path.exists(os.path.join(tmp_path, "commitlog", f"{SEG:020d}"))
    steps = [alloc.step() for _ in range(4)]
    assert sum(s.preheated_bytes for s in steps) == SEG - 16 * 1024
    # Then the segment being written, from write_pos on: it was created by the broker, never warmed.
    h.store.put_messages("T", 0, [message(b"first")])
    current = [alloc.step() for _ in range(4)]
    assert sum(s.preheated_bytes for s in current) == SEG - h.control.write_pos
    assert alloc.step().preheated_bytes == 0
    # The roll-over uses the ready file.
    for _ in range(4):
        h.store.put_messages("T", 0, [message(b"r" * 20_000)])
    assert h.control.write_pos > SEG

    def no_space(fd, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mapped_file, "fallocate", no_space)
    report = alloc.step()
    assert report.created_start is None and "cannot create" in report.problem
    monkeypatch.undo()
    assert alloc.step().created_start == 2 * SEG
    assert h.control.heartbeat_allocate_ms > 0
    alloc.close()
    h.close()


def test_allocate_keeps_no_mapping_of_the_segment_it_preheats(tmp_path):
    """The preheated pages stay in the page cache for the broker, not resident in the allocate worker."""
    cfg = tiny_config(tmp_path, preheat_enabled=True)
    h = Harness(cfg)
    alloc = AllocateService(cfg, h.control, preheat_chunk_bytes=16 * 1024)
    h.store.put_messages("T", 0, [message(b"first")])
    total = 0
    for _ in range(10):
        total += alloc.step().preheated_bytes
        assert SEG not in alloc.commitlog._segments and 0 not in alloc.commitlog._segments
    assert total == SEG + SEG - h.control.write_pos  # the next segment, then the current one ahead of writes
    alloc.close()
    h.close()
