"""IndexFiles: find records by key (``topic#UNIQ_KEY``, ``topic#<each KEYS word>``) and time.

Files live in ``<store_dir>/index/``, named by creation time ``yyyyMMddHHmmssSSS`` (RocketMQ),
layout in indexfile_format: a header, hash slots, and entries chained per slot (newest
first). The reput worker is the only writer; the broker looks keys up; the flush
worker msyncs; recovery deletes files that reach past the end of the CommitLog.

Write order per record: every entry, then its slot, and the header last. A reader or
a restarted writer therefore trusts only entry numbers below the header's indexCount;
a slot pointing at a higher number (writer died before the header) is followed
through that entry's ``prev`` (written before the slot) down to a committed one.

The reput worker writes through ``put_rows`` (the same rules and bytes, a batch of
records in one C call: cluster/_native ``rb_index_put_rows``); ``put_keys`` is the
Python twin, used for records the C side leaves to Python and by recovery.

Idempotence: the reput worker restarts from its last published cursor and may offer
records again; a record whose phys offset is not above the highest one indexed is
skipped, and all keys of one record go into one file, so "indexed" is per record.
"""

from __future__ import annotations

import os
import time

from rocketbox.cluster.config import StoreConfig
from rocketbox.cluster.shm import indexfile_format as fmt
from rocketbox.cluster.shm import paths
from rocketbox.cluster.shm.mapped_file import MappedFile, create_file
from rocketbox.cluster.shm import durable

# Chains are short (entries / slots); this only guards against a corrupt loop (the C dispatch's too).
LOOKUP_CHAIN_STEPS_MAX = fmt.LOOKUP_CHAIN_STEPS_MAX


def _parse_name(name: str) -> int | None:
    return int(name) if len(name) == 17 and name.isdigit() else None


def time_name(epoch_ms: int) -> str:
    """RocketMQ's index file name: local time yyyyMMddHHmmssSSS."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(epoch_ms // 1000)) + f"{epoch_ms % 1000:03d}"


class IndexFile:
    __slots__ = ("name", "mf", "mm", "slot_count", "entry_count_max")

    def __init__(self, path: str, slot_count: int, entry_count_max: int):
        self.name = os.path.basename(path)
        self.slot_count = slot_count
        self.entry_count_max = entry_count_max
        self.mf = MappedFile(path, fmt.file_size_bytes(slot_count, entry_count_max))
        self.mm = self.mf.mm

    def header(self) -> fmt.IndexHeader:
        return fmt.decode_header(self.mm)

    def committed_count(self) -> int:
        """The header's indexCount: entry numbers below it are complete (a fresh file reads 1)."""
        return max(fmt.HEADER.unpack_from(self.mm, 0)[5], 1)

    def slot_value(self, slot: int) -> int:
        return fmt.SLOT.unpack_from(self.mm, fmt.slot_position(slot))[0]

    def entry(self, number: int) -> fmt.IndexEntry:
        return fmt.decode_entry(self.mm, fmt.entry_position(self.slot_count, number))

    def newest_valid(self, number: int, below: int) -> int:
        """Walk back from entry ``number`` to the first one numbered below ``below`` (0 = none)."""
        steps = 0
        while number >= below and steps < LOOKUP_CHAIN_STEPS_MAX:
            if number >= self.entry_count_max:
                return 0  # garbage: not even a position in this file
            prev = self.entry(number).prev_index
            if prev >= number:
                return 0
            number = prev
            steps += 1
        return max(number, 0)

    def close(self) -> None:
        self.mf.close()


class IndexService:
    def __init__(self, cfg: StoreConfig):
        self.cfg = cfg
        self.dir = paths.index_dir(cfg.store_dir)
        durable.makedirs(self.dir)
        self.slot_count = cfg.index_slot_count
        self.entry_count_max = cfg.index_entry_count_max
        self.file_size_bytes = fmt.file_size_bytes(self.slot_count, self.entry_count_max)
        self._files: dict[str, IndexFile] = {}  # by name; names sort by creation time
        self._flushed_from_name = ""
        # Writer state (reput worker), loaded lazily from the newest file.
        self._writer: IndexFile | None = None
        self._writer_header: fmt.IndexHeader | None = None
        self._indexed_end_phys: int | None = None

    # ---- files ----

    def file_names(self) -> list[str]:
        return sorted(n for n in os.listdir(self.dir) if _parse_name(n) is not None)

    def _rescan(self) -> list[IndexFile]:
        """Open files created since the last look (by this or another process); oldest first."""
        names = self.file_names()
        for name in names:
            if name not in self._files:
                self._files[name] = IndexFile(os.path.join(self.dir, name), self.slot_count,
                                              self.entry_count_max)
        for name in [n for n in self._files if n not in names]:
            self._files.pop(name).close()
        return [self._files[n] for n in names]

    def _new_file(self, now_ms: int) -> IndexFile:
        names = self.file_names()
        name = time_name(now_ms)
        # Names must keep increasing even if the clock steps back: order = age.
        while names and name <= names[-1]:
            name = str(int(names[-1]) + 1)
        create_file(os.path.join(self.dir, name), self.file_size_bytes)
        f = self._files[name] = IndexFile(os.path.join(self.dir, name), self.slot_count,
                                          self.entry_count_max)
        return f

    def _load_writer(self) -> None:
        files = self._rescan()
        self._writer = files[-1] if files else None
        self._writer_header = self._writer.header() if self._writer else None
        if self._writer is not None:
            self._repair_uncommitted(self._writer)
        self._indexed_end_phys = -1
        for f in reversed(files):
            h = f.header()
            if h.index_count > 1:
                self._indexed_end_phys = h.end_phys_offset
                break

    def _repair_uncommitted(self, f: IndexFile) -> int:
        """Undo entries a dead writer wrote past the header's indexCount.

        Their slots would otherwise keep pointing at numbers that the next records
        reuse, splicing one key's chain onto another's and losing the older entries.
        Each such slot is pointed back at its newest committed entry and the stale
        entry is zeroed. Returns entries undone.
        """
        committed = f.committed_count()
        undone = 0
        number = committed
        zero_entry = bytes(fmt.ENTRY_SIZE)
        while number < self.entry_count_max:
            pos = fmt.entry_position(self.slot_count, number)
            if f.mm[pos:pos + fmt.ENTRY_SIZE] == zero_entry:
                break
            spos = fmt.slot_position(f.entry(number).key_hash % self.slot_count)
            slot_value = fmt.SLOT.unpack_from(f.mm, spos)[0]
            if slot_value >= committed:
                fmt.SLOT.pack_into(f.mm, spos, f.newest_valid(slot_value, committed))
            number += 1
        for n in range(committed, number):  # zero after all slots are fixed: fixing reads prevs
            pos = fmt.entry_position(self.slot_count, n)
            f.mm[pos:pos + fmt.ENTRY_SIZE] = zero_entry
            undone += 1
        return undone

    @property
    def indexed_end_phys(self) -> int:
        """Phys offset of the last record indexed; -1 when none."""
        if self._indexed_end_phys is None:
            self._load_writer()
        return self._indexed_end_phys

    def last_update(self) -> tuple[int, int]:
        """(store time ms, phys offset) of the newest indexed record, from the newest file holding
        entries (RocketMQ's indexLastUpdateTimestamp / indexLastUpdatePhyoffset); (0, 0) when none."""
        for f in reversed(self._rescan()):
            h = f.header()
            if h.index_count > 1:
                return h.end_timestamp_ms, h.end_phys_offset
        return 0, 0

    # ---- writing (reput worker) ----

    def put(self, key: str, phys_offset: int, store_timestamp_ms: int) -> bool:
        return self.put_keys((key,), phys_offset, store_timestamp_ms) > 0

    def put_keys(self, keys, phys_offset: int, store_timestamp_ms: int) -> int:
        """Index one record under ``keys``; returns entries written (0 when already indexed).

        Raises MappedFileCreateError when a new file is needed and cannot be made.
        """
        if self._indexed_end_phys is None:
            self._load_writer()
        if phys_offset <= self._indexed_end_phys or not keys:
            return 0
        keys = list(keys)[: self.entry_count_max - 1]
        f, h = self._writer, self._writer_header
        if f is not None and h is None:
            h = self._writer_header = f.header()
        first = max(h.index_count, 1) if h is not None else 1
        if f is None or first + len(keys) > self.entry_count_max:
            f = self._new_file(int(time.time() * 1000))
            h = fmt.IndexHeader(0, 0, 0, 0, 0, 1)
            first = 1
        begin_ts = h.begin_timestamp_ms if first > 1 else store_timestamp_ms
        begin_phys = h.begin_phys_offset if first > 1 else phys_offset
        time_diff = fmt.time_diff_seconds(store_timestamp_ms, begin_ts)
        mm, slot_count = f.mm, self.slot_count
        slots_used = h.hash_slot_count
        number = first
        for key in keys:
            khash = fmt.key_hash(key)
            spos = fmt.slot_position(khash % slot_count)
            prev = fmt.SLOT.unpack_from(mm, spos)[0]
            if prev >= number or prev < 0:  # left by a writer that died before its header
                prev = f.newest_valid(prev, number) if prev > 0 else 0
            if prev == 0:
                slots_used += 1
            fmt.ENTRY.pack_into(mm, fmt.entry_position(slot_count, number), khash, phys_offset,
                                time_diff, prev)
            fmt.SLOT.pack_into(mm, spos, number)
            number += 1
        h = fmt.IndexHeader(begin_ts, store_timestamp_ms, begin_phys, phys_offset, slots_used, number)
        fmt.HEADER.pack_into(mm, 0, *h)
        self._writer, self._writer_header = f, h
        self._indexed_end_phys = phys_offset
        return len(keys)

    def put_rows(self, batch, row_from: int, row_to: int, phys_base: int) -> tuple[int, int]:
        """Index the extracted rows [row_from, row_to) of a ``_native.DispatchBatch`` in C.

        The same bytes as ``put_keys`` a record at a time (entries, slots, then the
        header, per record; already indexed records skipped). Returns (stop, row) as
        ``DispatchBatch.index_put``: on ``INDEX_NEW_FILE`` call ``start_new_file`` and
        go on from row; on ``INDEX_PYTHON`` the row is for ``put_keys``.
        """
        if self._indexed_end_phys is None:
            self._load_writer()
        f = self._writer
        stop, row, end = batch.index_put(f.mm if f is not None else None, self.slot_count,
                                         self.entry_count_max, row_from, row_to, phys_base,
                                         self._indexed_end_phys)
        if end != self._indexed_end_phys:
            self._indexed_end_phys = end
            self._writer_header = None   # read again by put_keys if it needs it: most steps never do
        return stop, row

    def start_new_file(self) -> None:
        """Make a new, empty file the one written (``put_rows`` found the current one full).

        Raises MappedFileCreateError when it cannot be made.
        """
        if self._indexed_end_phys is None:
            self._load_writer()
        self._writer = self._new_file(int(time.time() * 1000))
        self._writer_header = fmt.IndexHeader(0, 0, 0, 0, 0, 1)

    # ---- reading (broker) ----

    def lookup(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Phys offsets of records that may carry ``key`` in [begin_ms, end_ms], newest first.

        Hash matches only: the caller reads each record and compares the real key.
        Index times have second resolution, so an entry counts when its second overlaps
        the range (the caller checks the exact store timestamp).
        """
        khash = fmt.key_hash(key)
        found: list[int] = []
        seen: set[int] = set()
        for f in reversed(self._rescan()):
            if len(found) >= max_num:
                break
            h = f.header()
            committed = max(h.index_count, 1)
            if committed <= 1 or h.end_timestamp_ms < begin_ms or h.begin_timestamp_ms > end_ms:
                continue
            number = f.slot_value(khash % self.slot_count)
            if number >= committed:
                number = f.newest_valid(number, committed)
            steps = 0
            while 0 < number < committed and steps < LOOKUP_CHAIN_STEPS_MAX and len(found) < max_num:
                e = f.entry(number)
                if e.key_hash == khash:
                    t_ms = h.begin_timestamp_ms + e.time_diff_s * 1000
                    if t_ms <= end_ms and t_ms + 999 >= begin_ms and e.phys_offset not in seen:
                        seen.add(e.phys_offset)
                        found.append(e.phys_offset)
                if e.prev_index >= number:
                    break  # chains only point back; anything else is damage
                number = e.prev_index
                steps += 1
        return found

    # ---- durability and repair ----

    def flush(self) -> int:
        """msync files written since the last flush (the newest, and any that filled up)."""
        files = [f for f in self._rescan() if f.name >= self._flushed_from_name]
        for f in files:
            f.mf.flush()
        if files:
            self._flushed_from_name = files[-1].name
        return len(files)

    def delete_after_phys(self, phys_end: int) -> int | None:
        """Delete files holding entries for records at or past ``phys_end`` (recovery).

        Returns the lowest begin phys offset among deleted files (re-index from there),
        or None when nothing was deleted.
        """
        reindex_from = None
        for f in self._rescan():
            h = f.header()
            if h.index_count > 1 and h.end_phys_offset >= phys_end:
                reindex_from = h.begin_phys_offset if reindex_from is None else min(
                    reindex_from, h.begin_phys_offset)
                name = f.name
                self._files.pop(name).close()
                durable.unlink(os.path.join(self.dir, name))
        for name in os.listdir(self.dir):
            if ".tmp." in name:
                os.unlink(os.path.join(self.dir, name))
        self._writer = self._writer_header = self._indexed_end_phys = None
        return reindex_from

    def delete_files_below(self, floor_phys: int) -> int:
        """Retention: delete the files (never the newest, which the reput worker writes) whose
        entries are all of records below ``floor_phys``; oldest first. Returns files deleted."""
        files = self._rescan()
        deleted = 0
        for f in files[:-1]:
            if f.header().end_phys_offset >= floor_phys:
                break
            name = f.name
            self._files.pop(name).close()
            durable.unlink(os.path.join(self.dir, name))
            deleted += 1
        return deleted

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()
        self._writer = self._writer_header = self._indexed_end_phys = None
