"""The CommitLog recovery scan over damaged stores: a store (``tests/store_harness.Harness``, 64 KiB
segments) takes random messages, crashes (its abort marker stays), has bytes of its segments or
its checkpoint changed, and opens again. Recovery never raises; it never cuts a record that was
not damaged (nothing below the first damaged record is lost); everything below the end it finds
decodes with its CRC; every ConsumeQueue entry it leaves names its record; and the store takes and
serves a new message afterwards. Records whose header, topic or properties were damaged pass
the body CRC today (RocketMQ's whole-record CRC would catch them): their entries are only read."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import strategies as st

from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm.commitlog_format import EndOfFile
from rocketbox.cluster.shm.paths import checkpoint_path
from tests.fuzz.budget import run_hypothesis
from tests.store_harness import Harness, message, tiny_config

TOPICS = ("A", "B")
_batches = st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 2),
                              st.lists(st.integers(1, 3000), min_size=1, max_size=6)), min_size=1, max_size=8)
# (kind, where as a fraction of the bytes written, a value): in place, the segment keeps its size.
_damage = st.lists(st.tuples(st.sampled_from(("flip", "byte", "zero", "garbage", "int32", "stale", "checkpoint")),
                             st.floats(0, 1), st.integers(0, 1 << 16)), max_size=3)


def _damage_segment(data: bytearray, kind: str, pos: int, value: int) -> tuple[int, int]:
    """Change ``data`` at ``pos``; the [start, end) range of bytes it may have changed."""
    if kind == "flip":
        data[pos] ^= 1 << (value % 8)
        return pos, pos + 1
    if kind == "byte":
        data[pos] = value % 256
        return pos, pos + 1
    if kind == "zero":
        end = min(len(data), pos + 1 + value % 512)
        data[pos:end] = bytes(end - pos)
        return pos, end
    if kind == "int32":
        end = min(len(data), pos + 4)
        data[pos:end] = (value - (1 << 15)).to_bytes(4, "big", signed=True)[:end - pos]
        return pos, end
    end = min(len(data), pos + 1 + value % 300)       # garbage: random-looking bytes
    data[pos:end] = bytes((value * 131 + i * 97) % 256 for i in range(end - pos))
    return pos, end


def _check_recovery(value) -> None:
    batches, damage, dispatch_first = value
    with tempfile.TemporaryDirectory(prefix="fuzz-recovery-") as root:
        cfg = tiny_config(os.path.join(root, "store"))
        harness = Harness(cfg)
        try:
            for n, (topic, queue_id, sizes) in enumerate(batches):
                messages = [message(bytes([65 + i % 26]) * size, tags=f"t{i}", uniq=f"U{n}-{i}")
                            for i, size in enumerate(sizes)]
                assert harness.store.put_messages(topic, queue_id, messages).status.name == "PUT_OK"
            if dispatch_first:
                harness.dispatch_all()
            write_end = harness.control.write_pos
            records = [(phys, rec.total_size) for phys, rec in harness.store.commitlog.iter_from(0, write_end)]
            file_size = harness.store.commitlog.file_size_bytes
            segments = {start: harness.store.commitlog.segment_path(start)
                        for start in range(0, write_end + 1, file_size)}
        finally:
            harness.close(clean=False)
        first_damaged = write_end
        damaged: list[tuple[int, int]] = []   # records (phys, end) whose bytes changed
        for kind, where, amount in damage:
            if kind == "checkpoint":
                with open(checkpoint_path(cfg.store_dir), "r+b") as f:
                    raw = bytearray(f.read())
                    if raw:
                        raw[int(where * (len(raw) - 1))] ^= 1 << (amount % 8)
                        f.seek(0)
                        f.write(raw)
                continue
            phys = int(where * (write_end + 512 - 1)) if kind == "stale" else int(where * max(write_end - 1, 0))
            start = phys - phys % file_size
            path = segments.get(start)
            if path is None or not os.path.exists(path):
                continue
            with open(path, "r+b") as f:
                data = bytearray(f.read())
                lo, hi = _damage_segment(data, "garbage" if kind == "stale" else kind, phys - start, amount)
                f.seek(0)
                f.write(data)
            lo, hi = lo + start, hi + start
            hit = [p for p, size in records if p < hi and lo < p + size]
            if hit:
                first_damaged = min(first_damaged, hit[0])
                damaged += [(p, p + size) for p, size in records if p < hi and lo < p + size]
        _check_recovered(cfg, first_damaged, write_end, damaged)


def _check_recovered(cfg, first_damaged: int, write_end: int, damaged: list) -> None:
    harness = Harness(cfg)   # recovery runs here
    try:
        end = harness.report.end_phys
        assert first_damaged <= end <= write_end or (end > write_end and first_damaged == write_end), \
            (harness.report, first_damaged, write_end)
        log = harness.store.commitlog
        for phys, item in log.walk(log.min_offset(), end, check_crc=True):
            assert type(item) in (fmt.Record, EndOfFile), (phys, item, harness.report)
            assert type(item) is not fmt.Record or item.phys_offset == phys
        harness.dispatch_all()
        for topic in TOPICS:
            for queue_id in range(3):
                for offset, phys, size, _ in harness.store.queue_entries(topic, queue_id, 0, 10_000):
                    rec = harness.store.read_record(phys)
                    if any(lo <= phys < hi for lo, hi in damaged):
                        # Damage outside the body passes the body CRC (a known gap: RocketMQ's
                        # whole-record CRC is the remedy): such a record is served as it now reads.
                        continue
                    assert rec is not None and (rec.topic, rec.queue_id, rec.queue_offset, rec.total_size) == \
                        (topic, queue_id, offset, size), (topic, queue_id, offset, phys, rec)
        put = harness.store.put_messages("A", 0, [message(b"after recovery", uniq="after")])
        assert put.status.name == "PUT_OK"
        assert harness.store.read_record(put.phys_offset).body == b"after recovery"
    finally:
        harness.close(clean=False)


@pytest.mark.fuzz(weight=3.0)
def test_recovery_of_a_damaged_commitlog_keeps_every_undamaged_record(fuzz_seconds):
    strategy = st.tuples(_batches, _damage, st.booleans())
    run_hypothesis("commitlog recovery scan", fuzz_seconds, strategy, _check_recovery)
