"""MessageStore: the broker's facade over CommitLog, ConsumeQueues and IndexFiles.

Lives in the broker process, which is the only writer of CommitLog records and of
``control.write_pos``: every record goes through ``put_messages``, the one put
(``record_writer.py``). Their ConsumeQueue entries are written here too, after the appends
(``queue_writer.py``: once a loop turn, and before any read of a queue); IndexFile files are
written by the reput worker and only read here. A message is visible to ``get_messages`` once its
entry is written and, under sync flush, its record flushed (``visible_end``).

Outcomes are values: ``put_messages`` and ``get_messages`` return a status enum
(RocketMQ's PutMessageStatus / GetMessageStatus names) and never raise for bad input.
"""

from __future__ import annotations

import enum
import os
from typing import NamedTuple, Sequence

from rocketbox.cluster.config import SYNC_FLUSH, StoreConfig, parse_levels
from rocketbox.cluster import _native  # required: boundary scans run in C (no silent Python twin)
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import PROPERTY_KEYS, PROPERTY_UNIQ_KEY
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.indexfile import IndexService
from rocketbox.cluster.shm.indexfile_format import index_key
from rocketbox.cluster.shm import durable, record_crc_promise
from rocketbox.cluster.shm.queue_writer import QueueWriter
from rocketbox.cluster.shm.record_writer import (BatchBody, MessageToStore, PutMessageStatus, PutResult,
                                                 RecordWriter, copy_of_record)
from rocketbox.cluster.shm.recovery import RecoveryReport, abort_path, recover
from rocketbox.cluster.shm.store_files import FloorWatch

__all__ = ["BatchBody", "GetMessageStatus", "GetResult", "MessageStore", "MessageToStore", "PutMessageStatus",
           "PutResult", "copy_of_record"]

# A pull scans at most this many ConsumeQueue entries when tags filter most of them out
# (RocketMQ: max(16000 bytes of entries, maxMsgNums entries)).
SCAN_ENTRIES_MIN = 800


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"


class GetResult(NamedTuple):
    status: GetMessageStatus
    records: list  # raw record bytes, exactly as in the CommitLog (empty when ``joined``)
    next_begin_offset: int
    min_offset: int
    max_offset: int
    # With ``joined=True``: the records concatenated (what a pull answers with) and their count.
    payload: bytes = b""
    message_count: int = 0


_EMPTY: list = []


def native_scan_batch():
    """The native record scanner, for finding record boundaries."""
    return _native.DispatchBatch(4096)


class MessageStore:
    def __init__(self, cfg: StoreConfig, control: ControlBlock, *,
                 store_host: bytes = pack_host("127.0.0.1", 10911)):
        self.cfg = cfg
        self.control = control
        self.store_host = store_host
        self.commitlog = CommitLog(cfg)
        self.cqs = ConsumeQueueSet(cfg)
        self.index = IndexService(cfg)
        self._next_offsets: dict[tuple[str, int], int] = {}
        self._floor = FloorWatch(control, self.commitlog, self.cqs)
        self._boundary_scan = native_scan_batch()
        # The one writer of records (and of write_pos); it shares the next-offset table.
        self.writer = RecordWriter(cfg, control, self.commitlog, self._next_offsets, store_host)
        # ... and of their ConsumeQueue entries, the one route to a consumer.
        self.queues = QueueWriter(cfg, control, self.commitlog, self.cqs)
        # Under sync flush consumers read flushed records only (a power cut cannot take them back).
        self.durable_reads = cfg.flush_mode == SYNC_FLUSH

    @property
    def read_only(self) -> bool:
        """A slave's store (or a master unsure of its lease) appends only replicated bytes."""
        return self.writer.read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self.writer.read_only = value

    # ---- life cycle ----

    def recover(self, truncate_to: int | None = None) -> RecoveryReport:
        """Run at broker start, before the workers (see recovery.py)."""
        promised = record_crc_promise.read(self.cfg.store_dir)
        report = recover(self.cfg.store_dir, self.commitlog, self.cqs, self.index, self.control,
                         parse_levels(self.cfg.message_delay_levels), truncate_to=truncate_to,
                         record_crc_from=promised)
        writer = self.writer
        writer.record_crc_from = record_crc_promise.settle(self.cfg.store_dir, promised, report.end_phys,
                                                           writer.record_crc)
        self._next_offsets.clear()   # the writer's table too
        self._next_offsets.update({(cq.topic, cq.queue_id): cq.max_offset() for cq in self.cqs.queues()})
        for cq in self.cqs.queues():
            cq.forget_cache()
        self.queues.start_at(report.end_phys)
        writer.ready = True
        return report

    def mark_clean_shutdown(self) -> None:
        """The broker's last act on a clean stop: flush what it wrote, drop ``abort``."""
        end = self.commitlog.write_pos
        self.commitlog.flush(self.commitlog.segment_start(end), end)
        try:
            os.unlink(abort_path(self.cfg.store_dir))
        except FileNotFoundError:
            return
        durable.fsync_dir(self.cfg.store_dir)

    def close(self) -> None:
        self.writer.ready = False
        self.commitlog.close()
        self.cqs.close()
        self.index.close()

    # ---- writing: the one put (record_writer.py) ----

    def put_messages(self, topic: str, queue_id: int, records: Sequence[MessageToStore] | BatchBody) -> PutResult:
        """Append ``records`` (messages, or a producer's batch body) to one queue: ``RecordWriter.put``."""
        return self.writer.put(topic, queue_id, records)

    def put_encoded(self, queues: list, size: int, encode) -> PutResult:
        """Records the caller encodes, to one or more queues in one append: ``RecordWriter.put_encoded``."""
        return self.writer.put_encoded(queues, size, encode)

    # ---- replication (broker/ha.py) ----

    def replication_chunk(self, start: int, max_bytes: int):
        """CommitLog bytes from ``start`` (a record boundary) for a slave, or None when there are none.

        The chunk ends at a record boundary within one segment (an end-of-file blank goes with
        the segment it closes), so the slave's write position is always a record boundary too:
        at most ``max_bytes`` unless one record is larger. Boundaries come from the native record
        scan (a few microseconds per 4096 records), not from Python per record.
        """
        limit = self.control.write_pos
        if start >= limit:
            return None
        file_size = self.commitlog.file_size_bytes
        seg_start = start - start % file_size
        seg = self.commitlog.segment_for(start)
        if seg is None:
            return None
        mm = seg.mm
        pos = start - seg_start
        end = min(limit - seg_start, file_size, pos + max_bytes)
        if end < limit - seg_start and end < file_size:   # cut inside the written data: find a boundary
            _, next_pos, stop = self._boundary_scan.scan(mm, pos, end)
            cut = file_size if stop == "blank" and next_pos == pos else next_pos
            if cut == pos:   # a record larger than max_bytes (or the blank): send it whole
                cut = min(pos + fmt.total_size_at(mm, pos), file_size)
            end = cut
        return mm[pos:end] if end > pos else None

    def append_replicated(self, phys_offset: int, data, record_crc_from: int | None = None) -> bool:
        """A slave appends its master's bytes verbatim (``RecordWriter.append_replicated``)."""
        return self.writer.append_replicated(phys_offset, data, record_crc_from)

    @property
    def record_crc_from(self) -> int | None:
        """From where every record of this log carries the whole-record CRC property (None: not promised)."""
        return self.writer.record_crc_from

    # ---- the way to readers (queue_writer.py) ----

    def write_queue_entries(self) -> set[tuple[str, int]]:
        """The ConsumeQueue entries of every record appended so far; returns the queues that got
        entries since the last call (visible now, or under sync flush once flushed)."""
        self.queues.catch_up()
        return self.queues.take_touched()

    def queue_entries_caught_up(self) -> bool:
        """Write the entries of every record appended so far; False if some could not be (disk)."""
        self.queues.catch_up()
        return self.queues.queued_pos >= self.commitlog.write_pos

    def visible_end(self) -> int:
        """CommitLog position below which a queue's entries may be read."""
        return self.control.flushed_pos if self.durable_reads else self.queues.queued_pos

    # ---- reading ----

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int, tag_hashes: frozenset | None = None, *,
                     joined: bool = False) -> GetResult:
        """Records of one queue from queue offset ``offset`` (see GetMessageStatus).

        ``next_begin_offset`` follows rocketmq-protocol.md §5.4. Only entries of records below
        ``visible_end`` count. ``joined`` (a pull's read): the records come as one payload.
        """
        self.queues.catch_up()
        cq = self.cqs.get(topic, queue_id)
        if cq is None:
            status = (GetMessageStatus.NO_MESSAGE_IN_QUEUE if (topic, queue_id) in self._next_offsets
                      else GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
            return GetResult(status, _EMPTY, 0, 0, 0)
        floor = self.commitlog_floor()  # first: a moved floor resets what refresh_max remembers
        max_offset = cq.refresh_max(self.visible_end())
        min_offset = cq.min_offset(floor)
        if max_offset == 0:
            return GetResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, _EMPTY, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, _EMPTY, min_offset, min_offset,
                             max_offset)
        if offset == max_offset:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, _EMPTY, offset, min_offset,
                             max_offset)
        if offset > max_offset:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, _EMPTY, max_offset, min_offset,
                             max_offset)
        # Scanning further than asked only helps a tag filter skip non-matching entries.
        wanted = max(max_count, SCAN_ENTRIES_MIN) if tag_hashes is not None else max_count
        scan = min(max_offset - offset, wanted)
        selected: list[tuple[int, int]] = []
        total_bytes = 0
        scanned = 0
        for phys, size, tag_hash in cq.read(offset, scan):
            if selected and (len(selected) >= max_count or total_bytes + size > max_bytes):
                break
            scanned += 1
            if tag_hashes is not None and tag_hash not in tag_hashes:
                continue
            selected.append((phys, size))
            total_bytes += size
        next_begin = offset + scanned
        if not selected:
            return GetResult(GetMessageStatus.NO_MATCHED_MESSAGE, _EMPTY, next_begin, min_offset, max_offset)
        read = self.commitlog.read
        if not joined:
            records = [raw for raw in (read(phys, size) for phys, size in selected) if raw is not None]
            status = GetMessageStatus.FOUND if records else GetMessageStatus.NO_MATCHED_MESSAGE
            return GetResult(status, records, next_begin, min_offset, max_offset)
        # A batch's records sit back to back in the CommitLog: one read per contiguous run.
        # (A record may end exactly at its segment's end: the next one, though adjacent, is in another file.)
        chunks = []
        count = 0
        file_size = self.commitlog.file_size_bytes
        run_start = run_end = selected[0][0]
        run_count = 0
        segment_end = run_start - run_start % file_size + file_size
        for phys, size in selected:
            if phys != run_end or phys >= segment_end:
                raw = read(run_start, run_end - run_start)
                if raw is not None:
                    chunks.append(raw)
                    count += run_count
                run_start = run_end = phys
                run_count = 0
                segment_end = phys - phys % file_size + file_size
            run_end += size
            run_count += 1
        raw = read(run_start, run_end - run_start)
        if raw is not None:
            chunks.append(raw)
            count += run_count
        status = GetMessageStatus.FOUND if count else GetMessageStatus.NO_MATCHED_MESSAGE
        return GetResult(status, _EMPTY, next_begin, min_offset, max_offset, b"".join(chunks), count)

    def commitlog_floor(self) -> int:
        """The CommitLog's min offset (``retention.py``): bytes below it are deleted or about to be."""
        return self._floor.floor()

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.cqs.get(topic, queue_id)
        return cq.min_offset(self.commitlog_floor()) if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Queue offset just past the last entry visible to consumers."""
        self.queues.catch_up()
        cq = self.cqs.get(topic, queue_id)
        self.commitlog_floor()
        return cq.refresh_max(self.visible_end()) if cq is not None else 0

    def readable_end(self, topic: str, queue_id: int) -> int:
        """Queue offset past the last entry a pull may have served: a consumer may commit up to it."""
        return self.max_offset(topic, queue_id)

    def queue_next_offset(self, topic: str, queue_id: int) -> int:
        """Queue offset the next put gets (written, maybe not yet visible)."""
        return self._next_offsets.get((topic, queue_id), 0)

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[tuple[int, int, int, int]]:
        """Visible ConsumeQueue entries from ``offset``: (queue offset, phys, size, tag field)."""
        self.queues.catch_up()
        cq = self.cqs.get(topic, queue_id)
        if cq is None:
            return []
        floor = self.commitlog_floor()
        visible = cq.refresh_max(self.visible_end())
        offset = max(offset, cq.min_offset(floor))
        count = min(max_count, visible - offset)
        if count <= 0:
            return []
        return [(offset + i, phys, size, tag) for i, (phys, size, tag) in enumerate(cq.read(offset, count))]

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (binary search, as RocketMQ)."""
        low, high = self.min_offset(topic, queue_id), self.max_offset(topic, queue_id)
        cq = self.cqs.get(topic, queue_id)
        while cq is not None and low < high:
            middle = (low + high) // 2
            entries = cq.read(middle, 1)
            record = self.read_record(entries[0][0]) if entries else None
            if record is None or record.store_timestamp_ms >= timestamp_ms:
                high = middle
            else:
                low = middle + 1
        return low

    def store_timestamp_at(self, topic: str, queue_id: int, offset: int) -> int:
        """When the message at a queue offset was stored (ms); 0 when the queue has no such entry."""
        entries = self.queue_entries(topic, queue_id, offset, 1)
        record = self.read_record(entries[0][1]) if entries and entries[0][0] == offset else None
        return record.store_timestamp_ms if record is not None else 0

    def read_record(self, phys_offset: int) -> fmt.Record | None:
        """The record at ``phys_offset`` (e.g. from an offset msg id), None if there is none."""
        if not self.commitlog_floor() <= phys_offset < self.control.write_pos:
            return None
        rec = self.commitlog.decode_at(phys_offset, check_crc=False)
        return rec if type(rec) is fmt.Record and rec.phys_offset == phys_offset else None

    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int,
                     end_ms: int) -> list[fmt.Record]:
        """Records of ``topic`` whose UNIQ_KEY or one of whose KEYS is ``key``, newest first."""
        found = []
        for phys in self.index.lookup(index_key(topic, key), max_num, begin_ms, end_ms):
            rec = self.read_record(phys)
            if rec is None or rec.topic != topic or not begin_ms <= rec.store_timestamp_ms <= end_ms:
                continue
            props = rec.properties
            if props.get(PROPERTY_UNIQ_KEY) == key or \
                    key in props.get(PROPERTY_KEYS, "").split(" "):
                found.append(rec)
        return found

    # ---- topics ----

    def delete_topic(self, topic: str) -> int:
        """Remove the topic's ConsumeQueues (CommitLog records stay); returns queues removed."""
        for key in [k for k in self._next_offsets if k[0] == topic]:
            del self._next_offsets[key]
        self.queues.catch_up()   # its entries written now: none may come after its files are gone
        self.queues.forget_topic(topic)
        return self.cqs.delete_topic(topic)

    def topics_and_queues(self) -> dict[str, list[int]]:
        keys = set(self._next_offsets) | set(self.cqs.discover())
        out: dict[str, list[int]] = {}
        for topic, queue_id in sorted(keys):
            out.setdefault(topic, []).append(queue_id)
        return out
