"""Dispatch: CommitLog records -> ConsumeQueue and IndexFile entries (``Dispatcher``), and the
reput worker's service (``ReputService``), which builds the IndexFile.

One route from a write to its readers: the broker writes a record's ConsumeQueue entry itself,
once per loop turn after its appends (``shm/queue_writer.py``, a ``Dispatcher`` with
``build_index=False``) and publishes ``control.queued_pos``; its reads take entries below the
visible end (``write_pos``, under sync flush ``flushed_pos``). The reput worker builds only the
IndexFile (queries by key, not consumers), from ``control.dispatched_pos`` up to ``queued_pos``
(under sync flush also ``flushed_pos``: an index never names a record a power cut could still
take), and publishes ``dispatched_pos``: below it, both kinds of entry are written, which is what
the flush worker's checkpoint claims. Recovery runs both at once (``Dispatcher`` as built).
Decided by measurement (docs/ARCHITECTURE.md, "The path of one message").

Per record (RocketMQ's CommitLogDispatcherBuildConsumeQueue / BuildIndex):
- ConsumeQueue entry (phys, size, tag hash of TAGS), except for transaction
  PREPARED or ROLLBACK records (half messages stay invisible);
- IndexFile entries ``topic#UNIQ_KEY`` and ``topic#k`` for each space-separated KEYS
  word, except for ROLLBACK records.

Everything is idempotent, so restarting from an older cursor is harmless.

How (``Dispatcher.dispatch_range``): a batch of up to ``DISPATCH_ROWS`` records costs a
handful of C calls (cluster/_native ``DispatchBatch``), not Python per record:
``scan`` finds the records of one segment; ``extract`` reads TAGS, UNIQ_KEY and KEYS
out of each record's properties, hashes the tag and the ``topic#key`` index keys
(Java String.hashCode over UTF-16, UTF-8 decoded in C) and groups the rows into runs
of one queue with consecutive queue offsets; ``IndexService.put_rows`` writes the
IndexFile entries of every row in record order; ``ConsumeQueue.put_rows`` writes a
run's entries in one call a file. Per batch Python only looks up a queue per run.
A record whose topic or used property value is not valid UTF-8 is flagged and goes
through ``dispatch`` (Python), in its place. The bytes written are the same as
``dispatch_range_python``'s (tests/unit/test_native_dispatch.py), kept as the tests' oracle
(``use_native=False``). Recovery still re-dispatches with ``dispatch``.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

from rocketbox.cluster import _native as native  # required; use_native=False (a record at a time) is the tests' oracle
from rocketbox.cluster.config import DELAY_LEVELS_DEFAULT, SYNC_FLUSH, StoreConfig, parse_levels
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import (PROPERTY_KEYS, PROPERTY_TAGS,
                                                  PROPERTY_UNIQ_KEY, decode_properties)
from rocketbox.cluster.message.sysflags import (SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED,
                                                SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.commitlog_format import EndOfFile
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.message.tags import tag_hash_code
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.indexfile import IndexService
from rocketbox.cluster.shm.store_files import FloorWatch, open_store_files
from rocketbox.cluster.shm.indexfile_format import index_key
from rocketbox.cluster.shm.mapped_file import MappedFileCreateError
from rocketbox.cluster.shm.schedule_format import deliver_time_ms, level_of_queue, parked_due_ms
from rocketbox.cluster.message.system_topics import SCHEDULE_TOPIC

DISPATCH_ROWS = 4096  # records scanned and dispatched per batch of C calls
_TOPIC_CACHE_MAX = 4096
_SCAN_COLUMNS, _COL_POS = native.SCAN_COLUMNS, native.COL_POS
_SCAN_END, _SCAN_LIMIT = native.SCAN_END, native.SCAN_LIMIT
_COL_QUEUE_ID, _COL_QUEUE_OFFSET = native.COL_QUEUE_ID, native.COL_QUEUE_OFFSET
_COL_TOPIC_POS, _COL_TOPIC_LEN = native.COL_TOPIC_POS, native.COL_TOPIC_LEN
_INDEX_DONE, _INDEX_NEW_FILE = native.INDEX_DONE, native.INDEX_NEW_FILE


# A byte's low bit: 1 where a row's flags (their low byte, little-endian first) say DISPATCH_PYTHON.
_LOW_BIT = bytes(b & native.DISPATCH_PYTHON for b in range(256))
_LITTLE_ENDIAN = sys.byteorder == "little"


def _python_rows(batch, n: int) -> list[int]:
    """The rows of the last ``extract`` flagged for Python (rare: text that is not valid UTF-8),
    found without a Python step a row."""
    columns = native.DISPATCH_COLUMNS
    flags = batch.info[native.DCOL_FLAGS:n * columns:columns].tobytes()
    low = flags[::8] if _LITTLE_ENDIAN else flags[7::8]
    marks = low.translate(_LOW_BIT)
    found = []
    row = marks.find(1)
    while row >= 0:
        found.append(row)
        row = marks.find(1, row + 1)
    return found


class ReputReport(NamedTuple):
    dispatched_pos: int
    touched: frozenset  # {(topic, queue_id)} that got ConsumeQueue entries
    count: int  # records dispatched
    problem: str | None = None  # why the step stopped short (corrupt data, full disk)


def index_keys(topic: str, props: dict[str, str]) -> list[str]:
    keys = []
    uniq = props.get(PROPERTY_UNIQ_KEY)
    if uniq:
        keys.append(index_key(topic, uniq))
    words = props.get(PROPERTY_KEYS)
    if words:
        keys.extend(index_key(topic, k) for k in words.split(" ") if k)
    return keys


class Dispatcher:
    """The per-record work, shared by ReputService and recovery."""

    def __init__(self, cqs: ConsumeQueueSet, index: IndexService | None, *, native_rows: int = DISPATCH_ROWS,
                 use_native: bool = True, delay_levels_ms: tuple[int, ...] | None = None,
                 build_cq: bool = True, build_index: bool = True):
        """``build_cq`` / ``build_index``: which entries this dispatcher writes (the broker writes the
        ConsumeQueue's, the reput worker the IndexFile's, recovery both)."""
        self.cqs = cqs
        self.index = index
        self.build_cq = build_cq
        self.build_index = build_index and index is not None
        self.delay_levels_ms = delay_levels_ms or parse_levels(DELAY_LEVELS_DEFAULT)
        wants = (native.DISPATCH_CQ if build_cq else 0) | (native.DISPATCH_INDEX if self.build_index else 0)
        self._batch = native.DispatchBatch(native_rows, wants) if use_native else None
        self._topics: dict[bytes, str] = {}  # topic bytes -> str, for the ConsumeQueue runs

    def dispatch(self, phys: int, rec: fmt.Record, *, build_cq: bool = True,
                 build_index: bool = True) -> tuple[str, int] | None:
        """Write the entries of one record; returns its (topic, queue_id) if it got a CQ entry."""
        build_cq = build_cq and self.build_cq
        build_index = build_index and self.build_index
        tran = rec.sys_flag & SYSFLAG_TRANSACTION_MASK
        props = decode_properties(rec.properties_raw) if rec.properties_raw else {}
        if build_index and tran != SYSFLAG_TRANSACTION_ROLLBACK:
            keys = index_keys(rec.topic, props)
            if keys:
                self.index.put_keys(keys, phys, rec.store_timestamp_ms)
        if not build_cq or tran == SYSFLAG_TRANSACTION_PREPARED or \
                tran == SYSFLAG_TRANSACTION_ROLLBACK:
            return None
        cq = self.cqs.get(rec.topic, rec.queue_id, create=True)
        cq.put(rec.queue_offset, phys, rec.total_size, self._tag_field(rec, props))
        return rec.topic, rec.queue_id

    def _tag_field(self, rec: fmt.Record, props: dict[str, str]) -> int:
        """The tag hash, or for a parked delayed message its delivery time (SPEC §4)."""
        if rec.topic == SCHEDULE_TOPIC:
            if rec.queue_id >= len(self.delay_levels_ms):   # the timer queue: an exact time each
                try:
                    return parked_due_ms(props)
                except (KeyError, ValueError):
                    return rec.store_timestamp_ms
            return deliver_time_ms(rec.store_timestamp_ms, level_of_queue(rec.queue_id), self.delay_levels_ms)
        return tag_hash_code(props.get(PROPERTY_TAGS))

    def dispatch_range(self, start: int, limit: int, commitlog: CommitLog,
                       max_records: int | None = None) -> ReputReport:
        """Dispatch records in [start, limit); stops early at max_records or a problem."""
        if self._batch is None:
            return self.dispatch_range_python(start, limit, commitlog, max_records)
        batch = self._batch
        rows = batch.rows
        file_size = commitlog.file_size_bytes
        pos = start
        count = 0
        touched: set = set()
        problem = None
        wanted = max_records if max_records is not None else 1 << 62
        while pos < limit and count < wanted:
            seg_start = pos - pos % file_size
            seg = commitlog.segment_for(pos)
            if seg is not None:
                mm = seg.mm
                n, next_in_file, stop = batch.scan(mm, pos - seg_start, min(file_size, limit - seg_start),
                                                   wanted - count)
                if n:
                    done, problem = self._dispatch_rows(mm, seg_start, n, touched)
                    count += done
                    if done < n:  # a problem, or the key hashes were full: go on from that row
                        pos = seg_start + rows[done * _SCAN_COLUMNS + _COL_POS]
                        if problem is not None:
                            break
                        continue
                pos = seg_start + next_in_file
                if stop is _SCAN_END or stop is _SCAN_LIMIT:
                    continue
            # A blank, or something the scan would not read: decode_at has the last word.
            item = commitlog.decode_at(pos, check_crc=False, limit_phys=limit)
            kind = type(item)
            if kind is EndOfFile:
                pos += item.total_size
                continue
            if kind is not fmt.Record:
                problem = f"cannot read the CommitLog at {pos}: {item!r}"
                break
            try:  # not expected (the scan checks what decode_at does), but never stall on it
                key = self.dispatch(pos, item)
            except MappedFileCreateError as e:
                problem = str(e)
                break
            if key is not None:
                touched.add(key)
            pos += item.total_size
            count += 1
        return ReputReport(pos, frozenset(touched), count, problem)

    def _dispatch_rows(self, mm, seg_start: int, n: int, touched: set) -> tuple[int, str | None]:
        """Dispatch the ``n`` rows just scanned from ``mm`` (the segment at ``seg_start``).

        IndexFile entries first, in record order, then ConsumeQueue entries run by run (a run: one
        queue's rows with consecutive offsets, wherever they lie among other queues' rows).
        Rows the C extraction flags (text that is not valid UTF-8) go through ``dispatch``
        here, in their place. Returns (rows dispatched, problem).
        """
        batch = self._batch
        rows = batch.rows
        run_count = batch.extract(mm, n)
        n = batch.count
        done = n
        problem = None
        python_rows: list[tuple[int, int, fmt.Record]] = []
        if not self.build_index:
            python_rows = [(row, seg_start + pos, fmt.decode_at(mm, pos, check_crc=False))
                           for row in _python_rows(batch, n) for pos in (rows[row * _SCAN_COLUMNS + _COL_POS],)]
        index = self.index
        i = n if index is None or not self.build_index else 0
        while i < n:
            stop, i = index.put_rows(batch, i, n, seg_start)
            if stop == _INDEX_DONE:
                break
            try:
                if stop == _INDEX_NEW_FILE:
                    index.start_new_file()
                    continue
                pos = rows[i * _SCAN_COLUMNS]
                rec = fmt.decode_at(mm, pos, check_crc=False)
                self.dispatch(seg_start + pos, rec, build_cq=False)
                python_rows.append((i, seg_start + pos, rec))
                i += 1
            except MappedFileCreateError as e:
                problem = str(e)
                done = i
                break
        if not self.build_cq:
            return done, problem
        runs = batch.runs
        cqs = self.cqs
        topics = self._topics
        next_python = 0
        for r in range(run_count + 1):
            if r < run_count:
                first = runs[3 * r]
                if first >= done:
                    run_count = r
                    first = done
            else:
                first = done
            # Rows dispatched in Python get their ConsumeQueue entry in row order too.
            while next_python < len(python_rows) and python_rows[next_python][0] < first:
                row, phys, rec = python_rows[next_python]
                try:
                    key = self.dispatch(phys, rec, build_index=False)
                except MappedFileCreateError as e:
                    return row, str(e)
                if key is not None:
                    touched.add(key)
                next_python += 1
            if r >= run_count:
                break
            # A run's rows lie among other queues' rows, in order: those below ``done`` go now.
            count = runs[3 * r + 1] if done == n else len(batch.run_rows(first, done))
            base = first * _SCAN_COLUMNS
            topic_pos = rows[base + _COL_TOPIC_POS]
            raw = mm[topic_pos:topic_pos + rows[base + _COL_TOPIC_LEN]]
            topic = topics.get(raw)
            if topic is None:
                if len(topics) >= _TOPIC_CACHE_MAX:
                    topics.clear()
                topic = topics[raw] = raw.decode("utf-8", "replace")
            queue_id = rows[base + _COL_QUEUE_ID]
            try:
                if topic == SCHEDULE_TOPIC:
                    # Few and not on the hot path: their entries hold delivery times, made here.
                    for row in batch.run_rows(first, done):
                        pos = rows[row * _SCAN_COLUMNS + _COL_POS]
                        self.dispatch(seg_start + pos, fmt.decode_at(mm, pos, check_crc=False), build_index=False)
                else:
                    cqs.get(topic, queue_id, create=True).put_rows(batch, first, count,
                                                                   rows[base + _COL_QUEUE_OFFSET], seg_start)
            except MappedFileCreateError as e:
                return first, str(e)
            touched.add((topic, queue_id))
        return done, problem

    def dispatch_range_python(self, start: int, limit: int, commitlog: CommitLog,
                              max_records: int | None = None) -> ReputReport:
        """``dispatch_range`` a record at a time in Python (no native helper; parity tests)."""
        pos = start
        count = 0
        touched = set()
        problem = None
        for phys, item in commitlog.walk(start, limit):
            kind = type(item)
            if kind is EndOfFile:
                pos = phys + item.total_size
                continue
            if kind is not fmt.Record:
                problem = f"cannot read the CommitLog at {phys}: {item!r}"
                break
            if max_records is not None and count >= max_records:
                break
            try:
                key = self.dispatch(phys, item)
            except MappedFileCreateError as e:
                problem = str(e)
                break
            if key is not None:
                touched.add(key)
            pos = phys + item.total_size
            count += 1
        return ReputReport(pos, frozenset(touched), count, problem)


class ReputService:
    def __init__(self, cfg: StoreConfig, control: ControlBlock, *, commitlog: CommitLog | None = None,
                 cqs: ConsumeQueueSet | None = None, index: IndexService | None = None):
        self.cfg = cfg
        self.control = control
        self.commitlog, self.cqs, self.index = open_store_files(cfg, commitlog, cqs, index)
        # The IndexFile only: the broker writes the ConsumeQueue entries (shm/queue_writer.py).
        self.dispatcher = Dispatcher(self.cqs, self.index, delay_levels_ms=parse_levels(cfg.message_delay_levels),
                                     build_cq=False)
        self._floor = FloorWatch(control, self.commitlog, self.cqs)
        self.durable_reads = cfg.flush_mode == SYNC_FLUSH

    def step(self, max_records: int = 1024) -> ReputReport:
        """Index up to ``max_records`` new records and publish dispatched_pos."""
        # Never past the ConsumeQueue entries (the checkpoint claims both below dispatched_pos).
        limit = self.control.queued_pos
        if self.durable_reads:
            limit = min(limit, self.control.flushed_pos)
        self._floor.floor()
        start = self.control.dispatched_pos
        if start >= limit:
            return ReputReport(start, frozenset(), 0)
        report = self.dispatcher.dispatch_range(start, limit, self.commitlog, max_records)
        if report.dispatched_pos != start:
            self.control.dispatched_pos = report.dispatched_pos
            # Segments behind the cursor are never read here again: unmap them.
            self.commitlog.unmap_before(self.commitlog.segment_start(report.dispatched_pos))
        return report

    def close(self) -> None:
        self.commitlog.close()
        self.cqs.close()
        self.index.close()
