"""ConsumeQueues: per (topic, queue id), the index of that queue's records in the CommitLog.

Files: ``<store_dir>/consumequeue/<topic>/<queueId>/<20-digit start byte offset>``, each
``consumequeue_entries_per_file`` 20-byte entries (layout: consumequeue_format), preallocated,
all zero until written. Entry n (the queue offset) is at byte ``n * 20``.

Processes: the reput worker is the only writer (``put``, in queue-offset order, and
idempotent: a re-dispatch after a crash rewrites identical bytes). The broker reads;
the flush worker msyncs. Recovery (broker, no workers running) truncates.

Concurrent readers: an entry is written phys + tag first and size last, and a reader
checks size before reading phys, so a nonzero size always comes with the right phys
(x86-64 keeps stores, and loads, in program order). Even so an entry only counts as
visible once ``phys + size <= dispatched_pos``, which the reput worker publishes
after writing the entries (``refresh_max``); entries below the visible max never
change again, so they are read in bulk without care.
"""

from __future__ import annotations

import os
import shutil

from rocketbox.cluster.config import StoreConfig
from rocketbox.cluster.shm import paths
from rocketbox.cluster.shm.consumequeue_format import (ENTRY, ENTRY_SIZE, OFF_SIZE, OFF_TAG, PHYS, SIZE,
                                             TAG)
from rocketbox.cluster.shm.mapped_file import MappedFile, create_file
from rocketbox.cluster.shm import durable



def _parse_name(name: str) -> int | None:
    return int(name) if len(name) == 20 and name.isdigit() else None


class ConsumeQueue:
    def __init__(self, cfg: StoreConfig, topic: str, queue_id: int):
        self.topic = topic
        self.queue_id = queue_id
        self.dir = paths.consumequeue_dir(cfg.store_dir, topic, queue_id)
        self.entries_per_file = cfg.consumequeue_entries_per_file
        self.file_size_bytes = self.entries_per_file * ENTRY_SIZE
        self._files: dict[int, MappedFile] = {}
        self._visible_max: int | None = None  # cache of refresh_max
        self._min_offset: int | None = None  # cache of min_offset
        self._min_floor = 0  # the CommitLog floor the cached min_offset was found for
        self._flushed_file_start = 0  # files before this one were full and flushed

    # ---- files ----

    def file_starts(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(s for s in map(_parse_name, names) if s is not None)

    def exists(self) -> bool:
        return os.path.isdir(self.dir)

    def _file(self, start_byte: int, *, create: bool = False) -> MappedFile | None:
        f = self._files.get(start_byte)
        if f is None:
            path = os.path.join(self.dir, paths.file_name_of_offset(start_byte))
            if create:
                create_file(path, self.file_size_bytes)  # MappedFileCreateError when the disk is full
            elif not os.path.exists(path):
                return None
            f = self._files[start_byte] = MappedFile(path, self.file_size_bytes)
        return f

    def _locate(self, queue_offset: int, *, create: bool = False) -> tuple[MappedFile | None, int]:
        byte = queue_offset * ENTRY_SIZE
        pos = byte % self.file_size_bytes
        return self._file(byte - pos, create=create), pos

    # ---- writing (reput worker) ----

    def put(self, queue_offset: int, phys_offset: int, size: int, tag_hash: int) -> None:
        f, pos = self._locate(queue_offset, create=True)
        mm = f.mm
        PHYS.pack_into(mm, pos, phys_offset)
        TAG.pack_into(mm, pos + OFF_TAG, tag_hash)
        SIZE.pack_into(mm, pos + OFF_SIZE, size)  # last: a nonzero size marks the entry complete

    def pad_before(self, queue_offset: int) -> int:
        """Fill the entries of ``queue_offset``'s file before it with stand-ins for records
        retention deleted (CommitLog offset 0, below every floor: ``min_offset`` skips them), so a
        queue rebuilt from a log whose first records are gone reads as the contiguous run every
        reader expects. Returns the entries filled."""
        first = queue_offset - queue_offset % self.entries_per_file
        for offset in range(first, queue_offset):
            self.put(offset, 0, 1, 0)
        return queue_offset - first

    def put_rows(self, batch, row_first: int, count: int, queue_offset: int, phys_base: int) -> None:
        """Entries for ``count`` rows of a run of a ``_native.DispatchBatch`` (from ``row_first``
        along its ``next_in_run``), which hold this queue's offsets ``queue_offset`` on, one
        after the other: the same bytes and write order as ``put`` each, in one C call a file."""
        entries_per_file = self.entries_per_file
        while count > 0:
            f, pos = self._locate(queue_offset, create=True)
            n = min(count, entries_per_file - pos // ENTRY_SIZE)
            row_first = batch.cq_put(f.mm, pos, row_first, n, phys_base)
            queue_offset += n
            count -= n

    # ---- reading ----

    def get(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(phys_offset, size, tag_hash), or None when the entry is empty or absent."""
        if queue_offset < 0:
            return None
        f, pos = self._locate(queue_offset)
        if f is None:
            return None
        size = SIZE.unpack_from(f.mm, pos + OFF_SIZE)[0]
        if size == 0:
            return None
        return PHYS.unpack_from(f.mm, pos)[0], size, TAG.unpack_from(f.mm, pos + OFF_TAG)[0]

    def read(self, queue_offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """Up to ``max_count`` entries from ``queue_offset``, stopping at the first empty one."""
        out: list[tuple[int, int, int]] = []
        while len(out) < max_count and queue_offset >= 0:
            f, pos = self._locate(queue_offset)
            if f is None:
                break
            n = min(max_count - len(out), (self.file_size_bytes - pos) // ENTRY_SIZE)
            raw = f.mm[pos:pos + n * ENTRY_SIZE]
            for entry in ENTRY.iter_unpack(raw):
                if entry[1] == 0:
                    return out
                out.append(entry)
            queue_offset += n
        return out

    def min_offset(self, floor_phys: int = 0) -> int:
        """Queue offset of the first entry kept whose record lies at or above ``floor_phys``, the
        CommitLog's min offset (RocketMQ's correctMinOffset): retention deletes segments first and
        the ConsumeQueue files wholly below them after, so the first file kept may begin with
        entries of deleted records.

        Cached per floor: a pull asks for it every time, and once files exist only a new floor or
        this process's own truncation or deletion moves it (retention deletes a file only when
        every entry in it is below the floor).
        """
        if self._min_offset is None or self._min_floor != floor_phys:
            starts = self.file_starts()
            if not starts:
                return 0
            first = starts[0] // ENTRY_SIZE
            self._min_offset = first if floor_phys <= 0 else self._first_at_or_above(first, floor_phys)
            self._min_floor = floor_phys
        return self._min_offset

    def _first_at_or_above(self, low: int, floor_phys: int) -> int:
        """Binary search: entries of one queue lie in increasing CommitLog order."""
        high = self.max_offset()
        while low < high:
            middle = (low + high) // 2
            entry = self.get(middle)
            if entry is None or entry[0] < floor_phys:
                low = middle + 1
            else:
                high = middle
        return low

    def _wholly_below(self, starts: list[int], floor_phys: int) -> list[int]:
        """The leading files of ``starts`` (ascending, never the last) whose every entry is of a
        record below ``floor_phys``: their last entry is (entries lie in CommitLog order)."""
        below = []
        for start in starts[:-1]:
            last = self.get((start + self.file_size_bytes) // ENTRY_SIZE - 1)
            if last is None or last[0] >= floor_phys:
                break
            below.append(start)
        return below

    def max_offset(self) -> int:
        """Entries written (last non-empty + 1). Entries are contiguous, so binary search the last file."""
        starts = self.file_starts()
        if not starts:
            return 0
        last = starts[-1]
        f = self._file(last)
        if f is None:  # deleted meanwhile
            return 0
        lo, hi = 0, self.entries_per_file  # first empty entry is in [lo, hi]
        mm = f.mm
        while lo < hi:
            mid = (lo + hi) // 2
            if SIZE.unpack_from(mm, mid * ENTRY_SIZE + OFF_SIZE)[0] != 0:
                lo = mid + 1
            else:
                hi = mid
        return last // ENTRY_SIZE + lo

    def refresh_max(self, limit_phys: int) -> int:
        """Entries visible to consumers: a prefix whose records end at or below ``limit_phys``.

        Incremental: only entries past the previous answer are looked at.
        """
        m = self._visible_max
        if m is None:
            m = self.max_offset()
            floor = self.min_offset()
            while m > floor:
                e = self.get(m - 1)
                if e is not None and e[0] + e[1] <= limit_phys:
                    break
                m -= 1
        else:
            m = self._advance_visible(m, limit_phys)
        self._visible_max = m
        return m

    def _advance_visible(self, m: int, limit_phys: int) -> int:
        """First entry at or after ``m`` that is not visible, by binary search per file.

        Visible entries form a prefix: they are written in queue order, the size last, and a
        queue's records lie in increasing CommitLog order. A search costs ~log2(entries left)
        probes however many entries arrived (a probe per entry was most of a broker's time).
        """
        entries_per_file = self.entries_per_file
        while True:
            f, pos = self._locate(m)
            if f is None:
                return m
            mm = f.mm
            left = entries_per_file - pos // ENTRY_SIZE
            lo, hi = 0, left  # entries [0, lo) are visible, [hi, left) are not
            while lo < hi:
                mid = (lo + hi) // 2
                at = pos + mid * ENTRY_SIZE
                size = SIZE.unpack_from(mm, at + OFF_SIZE)[0]
                if size != 0 and PHYS.unpack_from(mm, at)[0] + size <= limit_phys:
                    lo = mid + 1
                else:
                    hi = mid
            m += lo
            if lo < left:
                return m

    # ---- repair, durability, removal ----

    def truncate_after_phys(self, phys_end: int, *, scrub: bool = True) -> int:
        """Keep the run of entries, from the first file's first, whose records end at or below
        ``phys_end``; empty everything after it (later files are deleted). Returns the entries
        emptied. Recovery only.

        After a power cut the entries past the last checkpoint are whatever the disk kept: a
        page never written back (zeros) can sit before one that was, or one of garbage, so
        neither a search for the last entry nor a walk back from it finds them all. Below the
        checkpoint's dispatched position the entries were flushed whole, so recovery passes that
        position (or the log's end, if lower) and dispatches again from there. ``scrub``: read the
        rest of the file for stray entries (after a clean stop it is known to be zeros).
        """
        starts = self.file_starts()
        if not starts:
            return 0
        m = self._advance_visible(starts[0] // ENTRY_SIZE, phys_end)
        f, pos = self._locate(m)
        emptied = 0
        if f is not None:
            emptied = self._empty_from(f, pos, self.file_size_bytes if scrub else
                                       (self.max_offset() - m) * ENTRY_SIZE + pos)
        # Files left empty go, but never the first: it carries the queue's min offset.
        for start in starts[1:]:
            if start >= m * ENTRY_SIZE:
                later = self._file(start)
                if later is not None:
                    emptied += self._empty_from(later, 0, self.file_size_bytes, zero=False)
                self._remove_file(start)
        self._visible_max = self._min_offset = None
        return emptied

    @staticmethod
    def _empty_from(f: MappedFile, pos: int, end: int, *, zero: bool = True) -> int:
        """Count, and unless ``zero`` is False zero, the entries in [pos, end) of ``f``, writing
        only chunks that hold anything (a queue file is mostly sparse zeros: writing them all
        would dirty megabytes a queue)."""
        emptied = 0
        chunk = ENTRY_SIZE * 4096
        mm = f.mm
        end = min(end, len(mm))
        for start in range(pos, end, chunk):
            stop = min(start + chunk, end)
            raw = mm[start:stop]
            if raw.count(0) == len(raw):
                continue
            emptied += sum(1 for entry in ENTRY.iter_unpack(raw) if entry != (0, 0, 0))
            if zero:
                mm[start:stop] = bytes(stop - start)
        return emptied

    def flush(self) -> int:
        """msync the files written since the last flush; returns files flushed."""
        starts = [s for s in self.file_starts() if s >= self._flushed_file_start]
        for start in starts:
            f = self._file(start)
            if f is not None:
                f.flush()
        if starts:
            self._flushed_file_start = starts[-1]
        return len(starts)

    def _remove_file(self, start: int) -> None:
        f = self._files.pop(start, None)
        if f is not None:
            f.close()
        durable.unlink(os.path.join(self.dir, paths.file_name_of_offset(start)))

    def delete_files_below(self, floor_phys: int) -> int:
        """Retention: delete, oldest first, the files whose every entry is of a record below
        ``floor_phys`` (never the last file: it carries the queue's next offset). Returns files deleted."""
        doomed = self._wholly_below(self.file_starts(), floor_phys)
        for start in doomed:
            self._remove_file(start)
        if doomed:
            self._visible_max = self._min_offset = None
        return len(doomed)

    def release_below(self, floor_phys: int) -> int:
        """Unmap files whose entries are all below ``floor_phys``: retention deletes them, and a
        deleted file's disk space comes back only once every process has unmapped it.

        Also forgets the visible max: this process may never have mapped the files retention
        deleted, and an incremental search from inside one would stop there."""
        self._visible_max = None
        released = self._wholly_below(sorted(self._files), floor_phys)
        for start in released:
            self._files.pop(start).close()
        return len(released)

    def delete_files(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self._visible_max = self._min_offset = None
        self._flushed_file_start = 0

    def forget_cache(self) -> None:
        """Drop the cached offsets (after recovery rewrote the files)."""
        self._visible_max = self._min_offset = None

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


class ConsumeQueueSet:
    """All ConsumeQueues of a store, (topic, queue_id) -> ConsumeQueue, opened on demand."""

    def __init__(self, cfg: StoreConfig):
        self.cfg = cfg
        self.dir = paths.consumequeue_root(cfg.store_dir)
        durable.makedirs(self.dir)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}

    def discover(self) -> list[tuple[str, int]]:
        """(topic, queue_id) of every queue directory on disk, also opening them."""
        found = []
        for topic in sorted(os.listdir(self.dir)):
            tdir = os.path.join(self.dir, topic)
            if not os.path.isdir(tdir):
                continue
            for q in os.listdir(tdir):
                if q.isdigit():
                    found.append((topic, int(q)))
                    self.get(topic, int(q), create=True)
        return sorted(found)

    def get(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        """The queue object; without ``create``, None unless its directory exists (another
        process may have created it since the last call, so a miss is not cached)."""
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self.cfg, topic, queue_id)
            if not create and not cq.exists():
                return None
            self._queues[key] = cq
        return cq

    def queues(self) -> list[ConsumeQueue]:
        return list(self._queues.values())

    def keys(self) -> list[tuple[str, int]]:
        return list(self._queues)

    def delete_topic(self, topic: str) -> int:
        """Remove every queue file of ``topic``; returns queues removed."""
        tdir = os.path.join(self.dir, topic)
        on_disk = {int(q) for q in os.listdir(tdir) if q.isdigit()} if os.path.isdir(tdir) else set()
        known = {k[1] for k in self._queues if k[0] == topic}
        for queue_id in known:
            self._queues.pop((topic, queue_id)).delete_files()
        shutil.rmtree(tdir, ignore_errors=True)
        return len(on_disk | known)

    def drop_vanished(self) -> int:
        """Close queues whose directory was deleted by another process (topic deletion)."""
        gone = [k for k, cq in self._queues.items() if not cq.exists()]
        for key in gone:
            self._queues.pop(key).close()
        return len(gone)

    def delete_files_below(self, floor_phys: int) -> int:
        """Retention over every queue on disk; returns ConsumeQueue files deleted."""
        self.discover()
        return sum(cq.delete_files_below(floor_phys) for cq in self.queues())

    def release_below(self, floor_phys: int) -> int:
        return sum(cq.release_below(floor_phys) for cq in self.queues())

    def flush_all(self) -> None:
        for cq in list(self._queues.values()):
            cq.flush()

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
        self._queues.clear()
