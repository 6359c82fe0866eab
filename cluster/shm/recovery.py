"""Recovery: bring the CommitLog, ConsumeQueues, IndexFiles and cursors back in line.

Runs in the broker process at start, before the flush, reput and allocate workers
(so it may write every cursor and the checkpoint). Steps:

1. Find the true end of the CommitLog. Verification (magic, sizes, body CRC, the whole-record
   CRC property where a record has one or the store promised it, and the
   PHYSICALOFFSET field matching the position, which catches stale bytes) starts at
   the checkpoint's ``commitlog_flushed_pos``, durable by definition; after an unclean
   stop (``abort`` present) at the start of that position's segment, to also catch
   damage just behind it. With no usable checkpoint: from the first segment.
2. Truncate the torn tail: zero it, delete later segments.
3. ConsumeQueues: keep the entries below the checkpoint's dispatched position (flushed before
   it was written) whose records the log still holds; empty every entry after them, wherever a
   power cut left one (``ConsumeQueue.truncate_after_phys``); mark for rebuild every queue whose files
   are not a contiguous run from 0, or whose last entry does not match its record,
   or whose last file is exactly full while the CommitLog holds later records of it
   (a whole file lost). Not detected: a queue directory deleted as a whole with no
   record of it after the checkpoint.
4. IndexFiles: delete files reaching past the end (re-indexed below).
5. Re-dispatch synchronously from min(checkpoint.dispatched_flushed_pos, end, first
   deleted index file) to the end, with the reput code. A record whose queue offset is
   beyond its queue's entries reveals missing files: that queue is rebuilt too.
   Rebuilt queues are rescanned from the first segment; a rebuilt queue whose first records
   retention deleted is padded to its first record left (``ConsumeQueue.pad_before``).
6. Flush everything, set write_pos = flushed_pos = dispatched_pos = queued_pos = end, write the
   checkpoint, and create ``abort`` (removed on a clean shutdown).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from rocketbox.cluster.shm import checkpoint
from rocketbox.cluster.message.sysflags import (SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED,
                                                SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm.commitlog_format import EndOfFile, looks_torn, unusable_topic
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueue, ConsumeQueueSet
from rocketbox.cluster.shm.consumequeue_format import ENTRY_SIZE
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.indexfile import IndexService
from rocketbox.cluster.shm import durable
from rocketbox.cluster.shm.paths import abort_path
from rocketbox.cluster.shm.reput import Dispatcher



@dataclass
class RecoveryReport:
    clean_shutdown: bool
    checkpoint_found: bool
    verify_from_phys: int = 0
    end_phys: int = 0
    stop_reason: str = ""  # what ended the data: "end", "incomplete", or a corruption
    records_verified: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    cq_entries_truncated: int = 0
    cq_queues_rebuilt: list = field(default_factory=list)
    index_files_deleted_from_phys: int | None = None
    redispatch_from_phys: int = 0
    records_redispatched: int = 0
    seconds: float = 0.0


def find_end(commitlog: CommitLog, start: int, durable_until: int = 0,
             record_crc_from: int | None = None) -> tuple[int, int, str]:
    """(end of valid data, records verified, why it stopped) walking from ``start``.

    Records ending at or below ``durable_until`` (the checkpoint's flushed position) were
    msynced whole: the torn-write heuristic, a guess about bytes a crash may have cut, does
    not apply to them (it must never cut acknowledged, flushed messages). A record at or past
    ``record_crc_from`` (``record_crc_promise.py``) must carry the whole-record CRC property:
    without it, a torn write garbled it.
    """
    end = start
    verified = 0
    reason = "end"
    for phys, item in commitlog.walk(start, check_crc=True):
        kind = type(item)
        if kind is fmt.Record:
            if item.phys_offset != phys:
                reason = f"record at {phys} says it is at {item.phys_offset}"
                break
            if phys + item.total_size > durable_until and looks_torn(item):
                reason = f"record at {phys} ends in zeros: a torn write"
                break
            if record_crc_from is not None and phys >= record_crc_from and \
                    fmt.stored_record_crc(item.properties_raw) is None:
                reason = f"record at {phys} lacks the CRC property every record from {record_crc_from} has"
                break
            if unusable_topic(item.topic):
                reason = f"record at {phys} has a topic no broker writes: {item.topic[:40]!r}"
                break
            verified += 1
        elif kind is EndOfFile:
            pass
        else:
            reason = "incomplete" if kind is fmt.Incomplete else item.reason
            break
        end = phys + item.total_size
    return end, verified, reason


def queue_looks_broken(cq: ConsumeQueue, commitlog: CommitLog, log_start: int) -> bool:
    """True when files are missing or the last entry does not describe its record.

    ``log_start``: the first CommitLog segment left. While it is 0 no retention ever ran and every
    queue starts at 0; after retention a queue starts at whichever file it kept, so a lost first
    file can no longer be told from a deleted one (RocketMQ cannot tell either)."""
    starts = cq.file_starts()
    if not starts:
        return True
    first = starts[0] if log_start > 0 else 0
    if starts != [first + i * cq.file_size_bytes for i in range(len(starts))]:
        return True  # a file is missing (retention deletes only from the oldest on)
    for start in starts[:-1]:
        if cq.get((start + cq.file_size_bytes) // ENTRY_SIZE - 1) is None:
            return True  # a file before the last is not full
    last = cq.max_offset() - 1
    if last < 0:
        return False
    entry = cq.get(last)
    if entry is None:
        return True   # the entry the size search found is not readable (a file cut short)
    phys, size, _ = entry
    rec = commitlog.decode_at(phys, check_crc=False)
    return not (type(rec) is fmt.Record and rec.total_size == size and rec.topic == cq.topic
                and rec.queue_id == cq.queue_id and rec.queue_offset == last)


def _probe_full_tails(cqs: ConsumeQueueSet, commitlog: CommitLog, end: int, skip: set) -> set:
    """Queues whose last file is exactly full may have lost a whole next file.

    Rare (1 in entries_per_file), so one CommitLog scan from the earliest such tail
    is affordable: a later record of the queue means entries are missing.
    """
    tails: dict[tuple[str, int], int] = {}
    for cq in cqs.queues():
        key = (cq.topic, cq.queue_id)
        count = cq.max_offset()
        if key in skip or count == 0 or count % cq.entries_per_file:
            continue
        phys, size, _ = cq.get(count - 1)
        tails[key] = phys + size
    missing: set = set()
    if not tails:
        return missing
    for _, rec in commitlog.iter_from(min(tails.values()), end):
        key = (rec.topic, rec.queue_id)
        hidden = rec.sys_flag & SYSFLAG_TRANSACTION_MASK in (
            SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)
        if key in tails and rec.phys_offset >= tails[key] and not hidden:
            missing.add(key)
            del tails[key]
            if not tails:
                break
    return missing


def recover(store_dir: str, commitlog: CommitLog, cqs: ConsumeQueueSet, index: IndexService,
            control: ControlBlock, delay_levels_ms: tuple[int, ...] | None = None,
            truncate_to: int | None = None, record_crc_from: int | None = None) -> RecoveryReport:
    """``truncate_to``: also cut the log there (a returning replica dropping what a new master
    does not hold); it must be a record boundary, else the record boundary before it is used.
    ``record_crc_from``: see ``find_end``."""
    t0 = time.monotonic()
    report = RecoveryReport(clean_shutdown=not os.path.exists(abort_path(store_dir)),
                            checkpoint_found=False)
    cp = checkpoint.read(store_dir)
    first = commitlog.min_offset()
    disk_end = commitlog.max_offset_on_disk()

    # 1. the true end
    start = first
    if cp is not None and first <= cp.commitlog_flushed_pos <= disk_end:
        report.checkpoint_found = True
        start = cp.commitlog_flushed_pos
        if not report.clean_shutdown:
            start = max(first, commitlog.segment_start(start))
    durable_until = cp.commitlog_flushed_pos if report.checkpoint_found else 0
    if truncate_to is not None and start > truncate_to:
        start = max(first, commitlog.segment_start(truncate_to))
        durable_until = min(durable_until, start)
    end, report.records_verified, report.stop_reason = find_end(commitlog, start, durable_until, record_crc_from)
    if not report.checkpoint_found and report.records_verified == 0 and end == first > 0:
        # Only segments the allocate worker created ahead of a first write: the log is empty and
        # starts at 0 (else a broker restarted before its first message would jump to the next
        # segment, and its replicas, which start at 0, would never meet it).
        end = 0
    if truncate_to is not None and end > truncate_to:
        end = _boundary_at_or_before(commitlog, truncate_to)
        report.stop_reason = f"truncated to {end} (diverged from the master)"
    report.verify_from_phys, report.end_phys = start, end

    # 2. the torn tail
    report.bytes_truncated, report.segments_deleted = commitlog.truncate_after(end)

    # 3. ConsumeQueues: keep what the checkpoint says was flushed (and the log still holds);
    # everything after it is dispatched again in step 5.
    dispatched_durable = first if cp is None else max(first, min(cp.dispatched_flushed_pos, end))
    cqs.discover()
    rebuild: set[tuple[str, int]] = set()
    for cq in cqs.queues():
        report.cq_entries_truncated += cq.truncate_after_phys(dispatched_durable, scrub=not report.clean_shutdown)
        if queue_looks_broken(cq, commitlog, first):
            rebuild.add((cq.topic, cq.queue_id))

    rebuild |= _probe_full_tails(cqs, commitlog, end, rebuild)

    # 4. IndexFiles
    report.index_files_deleted_from_phys = index.delete_after_phys(end)

    # 5. re-dispatch
    dispatcher = Dispatcher(cqs, index, delay_levels_ms=delay_levels_ms)
    redispatch_from = dispatched_durable
    if report.index_files_deleted_from_phys is not None:
        redispatch_from = max(first, min(redispatch_from, report.index_files_deleted_from_phys))
    report.redispatch_from_phys = redispatch_from
    _rebuild_queues(rebuild, commitlog, cqs, dispatcher, first, redispatch_from)
    gaps = _redispatch(commitlog, cqs, dispatcher, redispatch_from, end, report)
    _rebuild_queues(gaps, commitlog, cqs, dispatcher, first, end)
    report.cq_queues_rebuilt = sorted(rebuild | gaps)

    # 6. durable, cursors, checkpoint, abort marker
    commitlog.flush(commitlog.segment_start(end), end + commitlog.file_size_bytes)
    cqs.flush_all()
    index.flush()
    commitlog.set_write_pos(end)
    control.write_pos = end
    control.flushed_pos = end
    control.dispatched_pos = end
    control.queued_pos = end
    # Segments below the first one left are gone, and a deletion a crash cut short goes on from it.
    control.commitlog_min_pos = min(first, end)
    now_ms = int(time.time() * 1000)
    checkpoint.write(store_dir, checkpoint.Checkpoint(end, end, now_ms, now_ms))
    # Running from here on: durable, so a power cut is never taken for a clean shutdown.
    with open(abort_path(store_dir), "wb") as f:
        durable.fsync_fd(f.fileno(), abort_path(store_dir))
    durable.fsync_dir(store_dir)
    report.seconds = time.monotonic() - t0
    return report


def _boundary_at_or_before(commitlog: CommitLog, offset: int) -> int:
    """The last record boundary at or below ``offset`` (records never span segments)."""
    boundary = commitlog.segment_start(offset)
    for phys, item in commitlog.walk(boundary, check_crc=False):
        if type(item) is not fmt.Record or phys + item.total_size > offset:
            break
        boundary = phys + item.total_size
    return boundary


def _rebuild_queues(keys: set, commitlog: CommitLog, cqs: ConsumeQueueSet, dispatcher: Dispatcher,
                    start: int, end: int) -> None:
    """Recreate the ConsumeQueues ``keys`` from the records in [start, end)."""
    if not keys:
        return
    for topic, queue_id in keys:
        cq = cqs.get(topic, queue_id, create=True)
        cq.delete_files()
    unseen = set(keys)
    for phys, rec in commitlog.iter_from(start, end):
        key = (rec.topic, rec.queue_id)
        if key in keys:
            if key in unseen:   # its first record left: retention may have taken the ones before
                unseen.discard(key)
                cqs.get(*key).pad_before(rec.queue_offset)
            dispatcher.dispatch(phys, rec, build_index=False)


def _redispatch(commitlog: CommitLog, cqs: ConsumeQueueSet, dispatcher: Dispatcher, start: int,
                end: int, report: RecoveryReport) -> set:
    """Dispatch [start, end); returns queues found to have missing entries."""
    expected: dict[tuple[str, int], int] = {}
    gaps: set[tuple[str, int]] = set()
    for phys, rec in commitlog.iter_from(start, end):
        key = (rec.topic, rec.queue_id)
        visible = dispatcher.dispatch(phys, rec)
        report.records_redispatched += 1
        if visible is None or key in gaps:
            continue
        want = expected.get(key)
        if (want is None and _hole_before(cqs.get(*key, create=True), rec.queue_offset)) or \
                (want is not None and rec.queue_offset > want):
            gaps.add(key)
            continue
        expected[key] = rec.queue_offset + 1
    return gaps


def _hole_before(cq: ConsumeQueue, queue_offset: int) -> bool:
    """True when an entry before ``queue_offset`` is missing (its file was deleted), above the
    queue's first file: retention deletes older files on purpose."""
    return queue_offset > cq.min_offset() and cq.get(queue_offset - 1) is None
