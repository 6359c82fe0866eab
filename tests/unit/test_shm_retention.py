"""Retention (shm/retention.py): which segments go and when, what moves with them, and a deletion
cut short by a crash, on a real store stepped by hand as the worker processes would step it."""

import os
import time

import pytest

from rocketbox.cluster.shm import paths
from rocketbox.cluster.shm.retention import MANUAL_LOOKS, RetentionService
from rocketbox.cluster.shm.store import GetMessageStatus
from tests.store_harness import Harness, message, tiny_config

SEG = 64 * 1024
DAY_S = 86_400
BODY = b"x" * 1000  # ~60 records a 64 KiB segment


def fill(h: Harness, count: int = 600, queues: int = 2) -> None:
    """``count`` messages round-robin over ``queues`` queues of T, flushed and dispatched."""
    for i in range(count):
        h.store.put_messages("T", i % queues, [message(BODY, keys=f"k{i}", uniq=f"U{i:06d}")])
    h.flush.step()
    h.dispatch_all()
    h.flush.step_logics()


def retention(h: Harness, *, days_later: float = 4, hour_now: bool = True, disk_used: float = 10.0,
              **cfg) -> RetentionService:
    """A service whose clock is ``days_later`` ahead, with deleteWhen the hour of that clock (or not)."""
    now_s = time.time() + days_later * DAY_S
    hour = time.localtime(now_s).tm_hour
    when = f"{hour:02d}" if hour_now else f"{(hour + 12) % 24:02d}"
    settings = dict(h.cfg.__dict__, delete_when=when, delete_commitlog_files_interval_ms=0)
    settings.update(cfg)
    store_cfg = type(h.cfg)(**settings)
    return RetentionService(store_cfg, h.control, wall_clock_s=lambda: now_s,
                            disk_used=lambda path: disk_used)


def segments(tmp_path) -> list[int]:
    return sorted(int(n) for n in os.listdir(paths.commitlog_dir(str(tmp_path))) if n.isdigit())


def cq_files(tmp_path, queue_id: int = 0) -> list[int]:
    return sorted(int(n) for n in os.listdir(paths.consumequeue_dir(str(tmp_path), "T", queue_id)))


def test_expired_segments_go_at_the_delete_hour_with_their_queue_and_index_files(tmp_path):
    h = Harness(tiny_config(tmp_path))
    fill(h)
    before = segments(tmp_path)
    assert len(before) >= 9 and len(cq_files(tmp_path)) >= 4
    report = retention(h, delete_file_batch_max=100).look(time.time() + 4 * DAY_S)
    current = h.store.commitlog.segment_start(h.control.write_pos)
    assert report.reason == "time" and segments(tmp_path) == [current]  # never the one being written
    assert report.floor == current == h.control.commitlog_min_pos
    assert report.consumequeue_files_deleted >= 6 and report.index_files_deleted >= 1

    # Queue min offsets move to the first entry of a record still kept; older offsets are corrected.
    for queue_id in (0, 1):
        low = h.store.min_offset("T", queue_id)
        assert low > 0 and cq_files(tmp_path, queue_id)[0] // 20 <= low
        first = h.store.queue_entries("T", queue_id, 0, 1)[0]
        assert first[0] == low and first[1] >= current
        result = h.store.get_messages("T", queue_id, 0, 32, 1 << 20)
        assert result.status is GetMessageStatus.OFFSET_TOO_SMALL and result.next_begin_offset == low
        assert h.store.get_messages("T", queue_id, low, 32, 1 << 20).status is GetMessageStatus.FOUND
    assert h.store.read_record(0) is None
    assert h.store.query_by_key("T", "k0", 10, 0, 2**62) == []
    newest = h.store.query_by_key("T", "k599", 10, 0, 2**62)
    assert [r.properties["UNIQ_KEY"] for r in newest] == ["U000599"]

    # A restart keeps it all as it is: no queue is taken for broken and rebuilt.
    mins = [h.store.min_offset("T", q) for q in (0, 1)]
    h.close()
    h = Harness(tiny_config(tmp_path))
    assert h.report.cq_queues_rebuilt == [] and h.control.commitlog_min_pos == current
    assert [h.store.min_offset("T", q) for q in (0, 1)] == mins
    h.close()


def test_nothing_goes_outside_the_hour_unless_asked(tmp_path):
    h = Harness(tiny_config(tmp_path))
    fill(h, 300)
    before = segments(tmp_path)
    service = retention(h, hour_now=False, delete_file_batch_max=100)
    assert service.step().segments_deleted == 0 and segments(tmp_path) == before
    assert service.step() is None  # the next look waits for clean_resource_interval_ms
    h.control.delete_requests = h.control.delete_requests + 1  # mqadmin deleteExpiredCommitLog
    report = service.step()
    assert report.reason == "manual" and len(segments(tmp_path)) == 1
    assert service._manual_looks_left == MANUAL_LOOKS - 1
    h.close()


def test_unexpired_segments_stay(tmp_path):
    h = Harness(tiny_config(tmp_path))
    fill(h, 300)
    before = segments(tmp_path)
    report = retention(h, days_later=1).look(time.time() + DAY_S)  # 24 h of the 72 kept
    assert report.segments_deleted == 0 and segments(tmp_path) == before
    h.close()


def test_over_the_disk_ratio_the_oldest_go_unexpired_in_batches(tmp_path):
    h = Harness(tiny_config(tmp_path))
    fill(h)
    before = segments(tmp_path)
    service = retention(h, days_later=0, hour_now=False, disk_used=99.0, delete_file_batch_max=3)
    report = service.look(time.time())
    assert report.reason == "space" and segments(tmp_path) == before[3:]
    while service.look(time.time()).segments_deleted:
        pass
    assert segments(tmp_path) == [h.store.commitlog.segment_start(h.control.write_pos)]
    h.close()


def test_bytes_not_yet_flushed_or_dispatched_stay(tmp_path):
    h = Harness(tiny_config(tmp_path))
    fill(h, 200)
    flushed_segment = h.store.commitlog.segment_start(h.control.flushed_pos)
    for i in range(400):  # written, neither flushed nor dispatched
        h.store.put_messages("T", 0, [message(BODY)])
    report = retention(h, delete_file_batch_max=100).look(time.time() + 4 * DAY_S)
    assert report.floor == flushed_segment and segments(tmp_path)[0] == flushed_segment
    h.close()


@pytest.mark.parametrize("unlinked_before_the_kill", [1, 4])
def test_a_deletion_cut_short_is_finished_or_undone_consistently(tmp_path, unlinked_before_the_kill):
    h = Harness(tiny_config(tmp_path))
    fill(h)
    # An hour between two unlinks: the service is dropped (as by a SIGKILL) with unlinks pending.
    service = retention(h, delete_file_batch_max=100, delete_commitlog_files_interval_ms=3_600_000)
    report = service.look(time.time() + 4 * DAY_S)
    for _ in range(unlinked_before_the_kill - 1):
        service._next_unlink_s = 0
        service.step()
    floor = h.control.commitlog_min_pos
    left = segments(tmp_path)
    assert report.segments_pending > 0 and left[0] < floor and len(left) > 1  # published, half done
    # Readers already treat the floor as the log's start.
    low = h.store.min_offset("T", 0)
    assert h.store.queue_entries("T", 0, 0, 1)[0][1] >= floor

    # The worker restarts alone: its first look finishes the job, whatever the hour.
    report = retention(h, hour_now=False).look(time.time())
    assert report.reason == "resume" and segments(tmp_path) == [floor]
    assert report.consumequeue_files_deleted > 0 and h.store.min_offset("T", 0) == low
    h.close()


def test_a_broker_restart_after_a_cut_short_deletion_keeps_the_segments_left(tmp_path):
    h = Harness(tiny_config(tmp_path))
    fill(h)
    retention(h, delete_file_batch_max=100, delete_commitlog_files_interval_ms=3_600_000).look(
        time.time() + 4 * DAY_S)
    left = segments(tmp_path)
    h.close()
    h = Harness(tiny_config(tmp_path))  # recovery: the floor goes back to the first segment left
    assert h.control.commitlog_min_pos == left[0] and h.report.cq_queues_rebuilt == []
    low = h.store.min_offset("T", 0)
    entries = h.store.queue_entries("T", 0, low, 1000)
    assert entries[0][1] >= left[0]
    for queue_offset, phys, size, _ in entries:  # every entry kept describes a readable record
        record = h.store.read_record(phys)
        assert record is not None and record.queue_offset == queue_offset
    assert entries[-1][0] == h.store.max_offset("T", 0) - 1
    h.close()


def test_a_reader_that_never_mapped_the_deleted_files_still_sees_the_queue_end(tmp_path):
    h = Harness(tiny_config(tmp_path))
    h.store.put_messages("T", 0, [message(BODY)])
    h.flush.step()
    h.dispatch_all()
    assert h.store.max_offset("T", 0) == 1  # this reader's visible max is cached inside file 0
    fill(h, 600, queues=1)
    retention(h, delete_file_batch_max=100).look(time.time() + 4 * DAY_S)
    assert h.store.max_offset("T", 0) == 601 and h.store.min_offset("T", 0) > 64
    h.close()
