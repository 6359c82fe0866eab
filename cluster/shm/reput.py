"""The reput (dispatch) service: CommitLog records -> ConsumeQueue + IndexFile entries.

Runs in the reput worker process (``step`` in a loop) and, synchronously, in recovery.
It reads records from ``control.dispatched_pos`` up to ``control.write_pos`` (the
broker publishes write_pos only after the bytes are written), writes their entries,
then publishes the new dispatched_pos: only then do consumers see them.

Per record (RocketMQ's CommitLogDispatcherBuildConsumeQueue / BuildIndex):
- ConsumeQueue entry (phys, size, tag hash of TAGS), except for transaction
  PREPARED or ROLLBACK records (half messages stay invisible);
- IndexFile entries ``topic#UNIQ_KEY`` and ``topic#k`` for each space-separated KEYS
  word, except for ROLLBACK records.

Everything is idempotent, so restarting from an older cursor is harmless.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from cluster.config import StoreConfig
from cluster.shm import commitlog_format as fmt
from cluster.shm.commitlog import CommitLog
from cluster.shm.consumequeue import ConsumeQueueSet
from cluster.shm.consumequeue_format import tag_hash_code
from cluster.shm.control import ControlBlock
from cluster.shm.indexfile import IndexService
from cluster.shm.indexfile_format import index_key
from cluster.shm.mapped_file import MappedFileCreateError

VANISHED_CHECK_INTERVAL_MS = 1000


class ReputReport(NamedTuple):
    dispatched_pos: int
    touched: frozenset  # {(topic, queue_id)} that got ConsumeQueue entries
    count: int  # records dispatched
    problem: str | None = None  # why the step stopped short (corrupt data, full disk)


def index_keys(topic: str, props: dict[str, str]) -> list[str]:
    keys = []
    uniq = props.get(fmt.PROPERTY_UNIQ_KEY)
    if uniq:
        keys.append(index_key(topic, uniq))
    words = props.get(fmt.PROPERTY_KEYS)
    if words:
        keys.extend(index_key(topic, k) for k in words.split(" ") if k)
    return keys


class Dispatcher:
    """The per-record work, shared by ReputService and recovery."""

    def __init__(self, cqs: ConsumeQueueSet, index: IndexService):
        self.cqs = cqs
        self.index = index

    def dispatch(self, phys: int, rec: fmt.Record, *, build_cq: bool = True,
                 build_index: bool = True) -> tuple[str, int] | None:
        """Write the entries of one record; returns its (topic, queue_id) if it got a CQ entry."""
        tran = rec.sys_flag & fmt.SYSFLAG_TRANSACTION_MASK
        props = fmt.decode_properties(rec.properties_raw) if rec.properties_raw else {}
        if build_index and tran != fmt.SYSFLAG_TRANSACTION_ROLLBACK:
            keys = index_keys(rec.topic, props)
            if keys:
                self.index.put_keys(keys, phys, rec.store_timestamp_ms)
        if not build_cq or tran == fmt.SYSFLAG_TRANSACTION_PREPARED or \
                tran == fmt.SYSFLAG_TRANSACTION_ROLLBACK:
            return None
        cq = self.cqs.get(rec.topic, rec.queue_id, create=True)
        cq.put(rec.queue_offset, phys, rec.total_size, tag_hash_code(props.get(fmt.PROPERTY_TAGS)))
        return rec.topic, rec.queue_id

    def dispatch_range(self, start: int, limit: int, commitlog: CommitLog,
                       max_records: int | None = None) -> ReputReport:
        """Dispatch records in [start, limit); stops early at max_records or a problem."""
        pos = start
        count = 0
        touched = set()
        problem = None
        for phys, item in commitlog.walk(start, limit):
            kind = type(item)
            if kind is fmt.EndOfFile:
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
        self.commitlog = commitlog or CommitLog(cfg)
        self.cqs = cqs or ConsumeQueueSet(cfg)
        self.index = index or IndexService(cfg)
        self.dispatcher = Dispatcher(self.cqs, self.index)
        self._vanished_checked_ms = 0

    def step(self, max_records: int = 1024) -> ReputReport:
        """Dispatch up to ``max_records`` new records and publish dispatched_pos."""
        now_ms = int(time.time() * 1000)
        self.control.heartbeat_reput_ms = now_ms
        if now_ms - self._vanished_checked_ms >= VANISHED_CHECK_INTERVAL_MS:
            # A deleted topic's files must not keep receiving entries through old mappings.
            self._vanished_checked_ms = now_ms
            self.cqs.drop_vanished()
        start = self.control.dispatched_pos
        limit = self.control.write_pos
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
