"""The CommitLog: one append-only log of records in fixed-size mapped segments.

Files live in ``<store_dir>/commitlog/``, each ``commitlog_file_size_bytes`` long and
named by its first phys offset, 20 digits zero-padded. A record never spans two
segments: when one does not fit (with 8 bytes to spare for the marker), the rest of
the segment becomes an end-of-file blank and the record goes to the next segment.

Processes (SPEC §1): the broker appends (``append``, the only writer of record
bytes); the flush worker msyncs (``flush``); the reput worker and recovery read
(``walk``/``iter_from``); the allocate worker creates the next segment ahead of need
(``ensure_segment``). Every process maps segments lazily and notices segments
created by others (``segment_for`` looks for the file on a miss), so none of them
needs to be told about a roll-over. ``truncate_after`` runs only in recovery, while
no worker runs.

Offsets: ``phys_offset`` is a byte position in the whole log; ``pos`` is a byte
position inside one segment file.
"""

from __future__ import annotations

import enum
import os
import time
from typing import Callable, Iterator, NamedTuple

from rocketbox.cluster.config import SYNC_FLUSH, StoreConfig
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm.commitlog_format import (BLANK_SIZE_MIN, EndOfFile, decode_segment_at,
                                                   encode_blank_into)
from rocketbox.cluster.shm import paths
from rocketbox.cluster.shm.mapped_file import MappedFile, MappedFileCreateError, create_file
from rocketbox.cluster.shm import durable

ZERO_CHUNK_BYTES = 1024 * 1024
# Truncation zeroes until this many consecutive bytes were already zero: bytes past
# a torn tail are contiguous (one writer appends in order), so a long zero run means
# the rest of the segment was never written, and we avoid faulting in a whole 1 GiB
# segment just to compare zeros.
ZERO_RUN_STOP_BYTES = 8 * 1024 * 1024
_ZEROS = bytes(ZERO_CHUNK_BYTES)


class AppendStatus(enum.Enum):
    OK = "OK"
    DISK_FULL = "DISK_FULL"  # a segment could not be created, or free space is under the minimum
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"  # cannot fit even an empty segment


class AppendOutcome(NamedTuple):
    status: AppendStatus
    phys_offset: int  # where the bytes went (meaningful when OK)


Fill = Callable[[object, int, int], None]  # fill(buf, pos_in_file, phys_offset)


def disk_free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use under ``path`` (tests monkeypatch this)."""
    return durable.disk().free_bytes(path)


class CommitLog:
    def __init__(self, cfg: StoreConfig):
        self.cfg = cfg
        self.dir = paths.commitlog_dir(cfg.store_dir)
        self.file_size_bytes = cfg.commitlog_file_size_bytes
        durable.makedirs(self.dir)
        self._segments: dict[int, MappedFile] = {}
        self._write_pos = 0
        # statvfs on every append would be a syscall per batch; once a second is plenty
        # to stop before the disk is full (segments themselves are preallocated).
        self.disk_check_interval_ms = 1000
        self._disk_checked_ms = -1 << 62
        self._disk_has_room = True
        self._appending_start: int | None = None   # the segment this process appends to (the writer's)
        # Under sync flush every batch is msynced alone, so what one msync writes back must stay
        # small: no readahead where appends go (mapped_file's docstring). Under async flush one
        # msync covers many batches anyway, and single pages cost the writer a fault each
        # (batched produce 570k against 607k msg/s, one sync send at a time -5%).
        self.appending_without_readahead = cfg.flush_mode == SYNC_FLUSH

    # ---- segments ----

    def segment_path(self, start: int) -> str:
        return os.path.join(self.dir, paths.file_name_of_offset(start))

    def segment_start(self, phys_offset: int) -> int:
        return phys_offset - phys_offset % self.file_size_bytes

    def segment_starts(self) -> list[int]:
        """Start offsets of the segment files on disk, ascending."""
        starts = (paths.offset_of_file_name(n) for n in os.listdir(self.dir))
        return sorted(s for s in starts if s is not None)

    def ensure_segment(self, start: int) -> MappedFile:
        """Map the segment starting at ``start``, creating it if missing.

        Raises MappedFileCreateError when it cannot be created (full disk and friends).
        """
        seg = self._segments.get(start)
        if seg is None:
            path = self.segment_path(start)
            create_file(path, self.file_size_bytes)
            seg = self._segments[start] = MappedFile(path, self.file_size_bytes)
        return seg

    def segment_for(self, phys_offset: int) -> MappedFile | None:
        """The segment holding ``phys_offset``, mapped on first use; None if no such file."""
        start = phys_offset - phys_offset % self.file_size_bytes
        seg = self._segments.get(start)
        if seg is None:
            path = self.segment_path(start)
            if not os.path.exists(path):  # another process may create it later: no negative cache
                return None
            seg = self._segments[start] = MappedFile(path, self.file_size_bytes)
        return seg

    def min_offset(self) -> int:
        starts = self.segment_starts()
        return starts[0] if starts else 0

    def max_offset_on_disk(self) -> int:
        """End of the last segment file (an upper bound for data)."""
        starts = self.segment_starts()
        return starts[-1] + self.file_size_bytes if starts else 0

    # ---- writing (broker only) ----

    @property
    def write_pos(self) -> int:
        """Phys offset where the next record goes, in this (the broker's) process."""
        return self._write_pos

    def room_in_segment(self) -> int:
        """The most bytes one ``append`` can take now without rolling to the next segment."""
        file_size = self.file_size_bytes
        return file_size - self._write_pos % file_size - BLANK_SIZE_MIN

    def set_write_pos(self, phys_offset: int) -> None:
        """Recovery places the cursor at the verified end of data."""
        self._write_pos = phys_offset

    def disk_has_room(self) -> bool:
        now_ms = time.monotonic_ns() // 1_000_000
        if now_ms - self._disk_checked_ms >= self.disk_check_interval_ms:
            self._disk_checked_ms = now_ms
            self._disk_has_room = disk_free_bytes(self.dir) >= self.cfg.disk_free_bytes_min
        return self._disk_has_room

    def append(self, size: int, fill: Fill) -> AppendOutcome:
        """Reserve ``size`` bytes in one segment and let ``fill`` write them.

        ``fill(buf, pos, phys_offset)`` must write exactly ``size`` bytes at
        ``buf[pos:]``. Rolls to the next segment (blank + create if needed) when
        they do not fit. Nothing changes unless the outcome is OK.
        """
        file_size = self.file_size_bytes
        if size <= 0 or size + BLANK_SIZE_MIN > file_size:
            return AppendOutcome(AppendStatus.MESSAGE_TOO_LARGE, -1)
        if not self.disk_has_room():
            return AppendOutcome(AppendStatus.DISK_FULL, -1)
        phys = self._write_pos
        pos = phys % file_size
        try:
            seg = self._segments.get(phys - pos) or self.ensure_segment(phys - pos)
            if size > self.room_in_segment():
                # Create the next segment before writing the blank, so a failure
                # leaves the current one untouched and the send can be retried.
                next_start = phys - pos + file_size
                next_seg = self.ensure_segment(next_start)
                encode_blank_into(seg.mm, pos, file_size - pos)
                if self.cfg.mlock_enabled:
                    # Only the segment being written stays pinned: locked memory does not grow with the log.
                    next_seg.mlock()
                    seg.munlock()
                seg, pos, phys = next_seg, 0, next_start
        except MappedFileCreateError:
            return AppendOutcome(AppendStatus.DISK_FULL, -1)
        self._appending_to(phys - pos, seg)
        fill(seg.mm, pos, phys)
        self._write_pos = phys + size
        return AppendOutcome(AppendStatus.OK, phys)

    def _appending_to(self, start: int, seg: MappedFile) -> None:
        """This process appends to the segment at ``start``. When that is a new one, under sync flush
        the pages it faults in there come one by one (``MappedFile.advise_appending``), and the one it
        leaves reads with readahead again."""
        if start == self._appending_start:
            return
        if self.appending_without_readahead:
            previous = self._segments.get(self._appending_start)
            if previous is not None:
                previous.advise_appending(False)
            seg.advise_appending(True)
        self._appending_start = start

    def append_raw(self, phys_offset: int, data) -> AppendStatus:
        """Write bytes replicated from a master verbatim at ``phys_offset`` (a slave's broker only).

        ``phys_offset`` must be the write position and ``data`` must lie in one segment: the
        master cuts its chunks at record boundaries and segment ends (``replication_chunk``).
        """
        file_size = self.file_size_bytes
        pos = phys_offset % file_size
        if phys_offset != self._write_pos or pos + len(data) > file_size:
            raise ValueError(f"replicated bytes [{phys_offset}, +{len(data)}) do not continue the log at "
                             f"{self._write_pos} within one segment")
        if not self.disk_has_room():
            return AppendStatus.DISK_FULL
        try:
            seg = self._segments.get(phys_offset - pos) or self.ensure_segment(phys_offset - pos)
        except MappedFileCreateError:
            return AppendStatus.DISK_FULL
        self._appending_to(phys_offset - pos, seg)
        seg.mm[pos:pos + len(data)] = data
        self._write_pos = phys_offset + len(data)
        return AppendStatus.OK

    # ---- reading (any process) ----

    def read(self, phys_offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``phys_offset``; None when the segment is missing or the range crosses it."""
        seg = self.segment_for(phys_offset)
        if seg is None or size < 0:
            return None
        pos = phys_offset % self.file_size_bytes
        if pos + size > self.file_size_bytes:
            return None
        return seg.mm[pos:pos + size]

    def decode_at(self, phys_offset: int, *, check_crc: bool = True,
                  limit_phys: int | None = None):
        """Record | EndOfFile | Incomplete | Corrupt at ``phys_offset``."""
        seg = self.segment_for(phys_offset)
        if seg is None:
            return fmt.Incomplete()
        pos = phys_offset % self.file_size_bytes
        limit = self.file_size_bytes if limit_phys is None else min(
            self.file_size_bytes, pos + max(limit_phys - phys_offset, 0))
        item = decode_segment_at(seg.mm, pos, limit, check_crc=check_crc)
        if type(item) is EndOfFile and item.total_size != self.file_size_bytes - pos:
            return fmt.Corrupt(f"blank of {item.total_size} bytes at {phys_offset} does not end the file")
        return item

    def walk(self, phys_offset: int, limit_phys: int | None = None, *,
             check_crc: bool = False) -> Iterator[tuple[int, object]]:
        """Yield ``(phys_offset, item)`` from ``phys_offset`` while below ``limit_phys``.

        Items are Record and EndOfFile (the next item is then at the next segment's
        start); the walk ends after yielding an Incomplete or Corrupt, or on reaching
        the limit exactly.
        """
        limit = self.max_offset_on_disk() if limit_phys is None else limit_phys
        phys = phys_offset
        while phys < limit:
            item = self.decode_at(phys, check_crc=check_crc, limit_phys=limit)
            yield phys, item
            kind = type(item)
            if kind is fmt.Record or kind is EndOfFile:
                phys += item.total_size
            else:
                return

    def iter_from(self, phys_offset: int, limit_phys: int | None = None, *,
                  check_crc: bool = False) -> Iterator[tuple[int, fmt.Record]]:
        """Records only, crossing end-of-file blanks."""
        for phys, item in self.walk(phys_offset, limit_phys, check_crc=check_crc):
            if type(item) is fmt.Record:
                yield phys, item

    # ---- durability and repair ----

    def flush(self, start_phys: int, end_phys: int) -> None:
        """msync the bytes ``[start_phys, end_phys)``, segment by segment."""
        phys = start_phys
        while phys < end_phys:
            start = self.segment_start(phys)
            seg_end = start + self.file_size_bytes
            seg = self.segment_for(phys)
            if seg is not None:
                seg.flush(phys - start, min(end_phys, seg_end) - start)
            phys = seg_end

    def truncate_after(self, phys_end: int) -> tuple[int, int]:
        """Erase everything from ``phys_end`` on (recovery only).

        Zeroes the tail of the segment holding ``phys_end`` and deletes later
        segments. Returns (bytes of data zeroed in that segment, segments deleted).
        """
        zeroed = 0
        seg = self.segment_for(phys_end)
        if seg is not None:
            mm = seg.mm
            pos = phys_end % self.file_size_bytes
            zero_run = 0
            while pos < self.file_size_bytes and zero_run < ZERO_RUN_STOP_BYTES:
                end = min(pos + ZERO_CHUNK_BYTES, self.file_size_bytes)
                chunk = mm[pos:end]
                if chunk == _ZEROS[:end - pos]:
                    zero_run += end - pos
                else:
                    zeroed = pos + len(chunk.rstrip(b"\0")) - phys_end % self.file_size_bytes
                    mm[pos:end] = _ZEROS[:end - pos]
                    zero_run = 0
                pos = end
        tail_start = self.segment_start(phys_end)
        deleted = 0
        for start in self.segment_starts():
            if start > tail_start:
                self._drop_segment(start)
                durable.unlink(self.segment_path(start))
                deleted += 1
        for name in os.listdir(self.dir):
            if ".tmp." in name:  # left by a creator that died mid-way
                os.unlink(os.path.join(self.dir, name))
        return zeroed, deleted

    def delete_segment(self, start: int) -> None:
        """Retention: unmap and unlink the segment at ``start`` (gone already is fine)."""
        self._drop_segment(start)
        durable.unlink(self.segment_path(start))

    def closed_at_ms(self, start: int) -> int:
        """When the segment at ``start`` stopped being written: the store time of the first record
        of the next segment (every segment before the last ends in a blank, then the log goes on
        there), else the file's modification time. RocketMQ asks the file's mtime; a record's time
        does not move when another process merely maps or msyncs the file."""
        next_start = start + self.file_size_bytes
        item = self.decode_at(next_start, check_crc=False)
        if type(item) is fmt.Record:
            return item.store_timestamp_ms
        try:
            return int(os.stat(self.segment_path(start)).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def unmap_before(self, phys_offset: int) -> None:
        """Unmap segments that end at or before ``phys_offset`` (a worker done with them)."""
        for start in [s for s in self._segments if s + self.file_size_bytes <= phys_offset]:
            self._drop_segment(start)

    def _drop_segment(self, start: int) -> None:
        seg = self._segments.pop(start, None)
        if seg is not None:
            seg.close()

    def close(self) -> None:
        for start in list(self._segments):
            self._drop_segment(start)
