"""Retention: RocketMQ's CleanCommitLogService and CleanConsumeQueueService, in the allocate worker.

A look runs every ``clean_resource_interval_ms``, or at once when the broker counts a
deleteExpiredCommitLog request in ``control.delete_requests``. It deletes, oldest first, CommitLog
segments that are

- expired (closed longer ago than ``file_reserved_time_ms``; ``CommitLog.closed_at_ms``), when the
  hour of day is one of ``delete_when`` or a deleteExpiredCommitLog request is pending (it stays
  pending for ``MANUAL_LOOKS`` looks, as RocketMQ's manualDeleteFileSeveralTimes), or
- the oldest, expired or not, while more than ``disk_max_used_space_ratio`` percent of the disk
  holding the store is in use;

never the segment being written, nor one holding bytes not yet flushed or dispatched, at most
``delete_file_batch_max`` a look, with ``delete_commitlog_files_interval_ms`` between two unlinks.

Order, so that a SIGKILL anywhere leaves a store every process reads consistently:

1. publish the new floor, ``control.commitlog_min_pos`` (the start of the first segment kept):
   readers treat every byte below it as gone from then on (queue min offsets move up to the first
   entry at or above it, ``ConsumeQueue.min_offset``; records below it are not served) and unmap
   what they hold below it;
2. unlink the segments below the floor, oldest first (the log stays one contiguous run);
3. delete the ConsumeQueue files and IndexFiles whose entries all lie below the floor.

A look finishes what an interrupted one began: segments below the published floor go first, and
step 3 runs whenever the floor is above the last one it ran for (at start, any). A broker restart
instead sets the floor back to the first segment left (recovery): the segments a crash left
behind are whole and their entries intact (step 3 had not run), and expire again.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, NamedTuple

from rocketbox.cluster.config import StoreConfig, delete_hours
from rocketbox.cluster.live_settings import read_live, with_values
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.store_files import open_store_files

log = logging.getLogger(__name__)

# RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES: how many looks a deleteExpiredCommitLog request lasts.
MANUAL_LOOKS = 20


def disk_used_percent(path: str) -> float:
    """Percent of the file system holding ``path`` in use, as df counts it (blocks not free)."""
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks if st.f_blocks else 0.0


class RetentionReport(NamedTuple):
    reason: str  # why segments were deleted: "time", "manual", "space", "resume", or "" (none)
    segments_deleted: int
    floor: int  # control.commitlog_min_pos after the look
    consumequeue_files_deleted: int
    index_files_deleted: int
    segments_pending: int  # chosen, below the floor, not yet unlinked


class RetentionService:
    """Maps its own files (it closes them after every look), never another service's.

    The unlinks of one look are spread over later steps, ``delete_commitlog_files_interval_ms``
    apart: the worker's loop stays free for its other work and stops at once when told to."""

    def __init__(self, cfg: StoreConfig, control: ControlBlock, *, wall_clock_s: Callable[[], float] = time.time,
                 disk_used: Callable[[str], float] = disk_used_percent):
        self.launch_cfg = self.cfg = cfg
        self.control = control
        self.commitlog, self.cqs, self.index = open_store_files(cfg)
        self.wall_clock_s = wall_clock_s
        self.disk_used = disk_used
        self.hours = delete_hours(cfg.delete_when)
        self._settings_version: int | None = None  # control.config_version last applied
        self._requests_seen = control.delete_requests
        self._manual_looks_left = 0
        self._next_look_s = 0.0
        self._reason = ""
        self._pending: list[int] = []  # segments below the published floor still to unlink, oldest first
        self._next_unlink_s = 0.0
        self._logics_floor = 0  # the floor the ConsumeQueue and index files were last cleaned for

    def step(self) -> RetentionReport | None:
        """Unlink the next pending segment when its time came, else look when a look is due;
        None when nothing was done."""
        now_s = self.wall_clock_s()
        version = self.control.config_version
        if version != self._settings_version:   # at start, and after updateBrokerConfig
            self._settings_version = version
            self.cfg = with_values(self.launch_cfg, read_live(self.launch_cfg.store_dir))
            self.hours = delete_hours(self.cfg.delete_when)
        requests = self.control.delete_requests
        if requests != self._requests_seen:
            self._requests_seen = requests
            self._manual_looks_left = MANUAL_LOOKS
            self._next_look_s = 0.0
        if self._pending:
            return self._unlink_due(now_s) if now_s >= self._next_unlink_s else None
        if now_s < self._next_look_s:
            return None
        self._next_look_s = now_s + self.cfg.clean_resource_interval_ms / 1000
        return self.look(now_s)

    def look(self, now_s: float) -> RetentionReport:
        """Choose what goes, publish the floor, and unlink what may go now."""
        manual = self._manual_looks_left > 0
        if manual:
            self._manual_looks_left -= 1
        self._reason, doomed = self._choose(now_s, manual)
        if doomed:
            floor = max(self.control.commitlog_min_pos, doomed[-1] + self.commitlog.file_size_bytes)
            self.control.commitlog_min_pos = floor
            log.info("retention (%s): deleting %d CommitLog segment(s) [%d, %d); the log now starts at %d",
                     self._reason, len(doomed), doomed[0], floor, floor)
            self._pending = doomed
            self._next_unlink_s = now_s
        self.commitlog.close()  # this process maps segments only to read their closing times
        return self._unlink_due(now_s)

    def _unlink_due(self, now_s: float) -> RetentionReport:
        """All pending segments without a pause between unlinks, else the next one; once none is
        left, the ConsumeQueue and index files below the floor."""
        unlinked = 0
        while self._pending and (not unlinked or not self.cfg.delete_commitlog_files_interval_ms):
            self.commitlog.delete_segment(self._pending.pop(0))
            unlinked += 1
        self._next_unlink_s = now_s + self.cfg.delete_commitlog_files_interval_ms / 1000
        floor = self.control.commitlog_min_pos
        cq_files = index_files = 0
        if not self._pending and floor > self._logics_floor:
            cq_files = self.cqs.delete_files_below(floor)
            index_files = self.index.delete_files_below(floor)
            self.cqs.close()  # found again next time: topics come and go
            self.index.close()
            self._logics_floor = floor
            if cq_files or index_files:
                log.info("retention: deleted %d ConsumeQueue and %d index file(s) below %d",
                         cq_files, index_files, floor)
        return RetentionReport(self._reason if unlinked else "", unlinked, floor, cq_files, index_files,
                               len(self._pending))

    def _choose(self, now_s: float, manual: bool) -> tuple[str, list[int]]:
        """(why, the segments to delete, oldest first)."""
        cl = self.commitlog
        size = cl.file_size_bytes
        # Bytes not yet msynced or indexed must stay; so must the segment being written.
        kept_from = cl.segment_start(min(self.control.write_pos, self.control.flushed_pos,
                                         self.control.dispatched_pos))
        floor = self.control.commitlog_min_pos
        candidates = [s for s in cl.segment_starts() if s + size <= kept_from]
        leftover = [s for s in candidates if s + size <= floor]
        if leftover:
            return "resume", leftover[:self.cfg.delete_file_batch_max]
        time_up = time.localtime(now_s).tm_hour in self.hours
        over_ratio = self.disk_used(cl.dir) > self.cfg.disk_max_used_space_ratio
        if not (time_up or manual or over_ratio):
            return "", []
        reason = "space" if over_ratio else "manual" if manual else "time"
        reserved_ms = self.cfg.file_reserved_time_ms
        doomed: list[int] = []
        for start in candidates[:self.cfg.delete_file_batch_max]:
            expired = cl.closed_at_ms(start) + reserved_ms <= now_s * 1000
            if not expired and not (over_ratio and self._still_over_ratio(doomed)):
                break
            doomed.append(start)
        return reason, doomed

    def _still_over_ratio(self, doomed: list[int]) -> bool:
        """Above the ratio even without the segments already chosen (their blocks come back)."""
        st = os.statvfs(self.commitlog.dir)
        if not st.f_blocks:
            return False
        freed_blocks = len(doomed) * self.commitlog.file_size_bytes / st.f_frsize
        return self.disk_used(self.commitlog.dir) - 100.0 * freed_blocks / st.f_blocks > \
            self.cfg.disk_max_used_space_ratio

    def close(self) -> None:
        self.commitlog.close()
        self.cqs.close()
        self.index.close()
