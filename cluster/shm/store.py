"""MessageStore: the broker's facade over CommitLog, ConsumeQueues and IndexFiles.

Lives in the broker process, which is the only writer of CommitLog records and of
``control.write_pos``. ConsumeQueue and IndexFile files are written by the reput
worker and only read here; a message is visible to ``get_messages`` once the reput
worker's ``dispatched_pos`` has passed it.

Outcomes are values: ``put_messages`` and ``get_messages`` return a status enum
(RocketMQ's PutMessageStatus / GetMessageStatus names) and never raise for bad input.
"""

from __future__ import annotations

import enum
import itertools
import os
import struct
import time
from typing import NamedTuple, Sequence

from rocketbox.cluster.config import SYNC_FLUSH, StoreConfig, parse_levels
from rocketbox.cluster import _native  # required: batches and boundary scans run in C (no silent Python twin)
from rocketbox.cluster.shm import commitlog_format as fmt
from rocketbox.cluster.message.ids import offset_msg_id, pack_host
from rocketbox.cluster.message.properties import PROPERTY_KEYS, PROPERTY_UNIQ_KEY, encode_properties
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_MASK
from rocketbox.cluster.shm.commitlog import AppendStatus, CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.indexfile import IndexService
from rocketbox.cluster.shm.indexfile_format import index_key
from rocketbox.cluster.shm import durable, record_crc_promise
from rocketbox.cluster.shm.recent_writes import RecentWrites
from rocketbox.cluster.shm.recovery import RecoveryReport, abort_path, recover
from rocketbox.cluster.shm.store_files import FloorWatch

# A pull scans at most this many ConsumeQueue entries when tags filter most of them out
# (RocketMQ: max(16000 bytes of entries, maxMsgNums entries)).
SCAN_ENTRIES_MIN = 800


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # set by the broker (sync flush waits)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # set by the broker (sync replication)
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # not recovered yet, or closed
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    DISK_FULL = "DISK_FULL"  # RocketMQ: CREATE_MAPPED_FILE_FAILED / disk full
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"


class MessageToStore(NamedTuple):
    body: bytes  # as sent (compressed when sys_flag says so)
    flag: int
    # Already encoded (commitlog_format.encode_properties); the store drops a "__CRC32#" pair and
    # appends its own CRC property (commitlog_format.stored_properties).
    properties: bytes
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes  # 8 bytes: IPv4 + port
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


def copy_of_record(rec: fmt.Record, properties: dict[str, str], **changes) -> MessageToStore:
    """A stored record written again (delivered from a schedule, sent back, committed): the same
    body, flag, born time and host, with these properties and ``changes`` (sys_flag, reconsume_times)."""
    fields = dict(body=rec.body, flag=rec.flag, properties=encode_properties(properties),
                  sys_flag=rec.sys_flag, born_timestamp_ms=rec.born_timestamp_ms, born_host=rec.born_host,
                  reconsume_times=rec.reconsume_times)
    fields.update(changes)
    return MessageToStore(**fields)


class PutResult(NamedTuple):
    status: PutMessageStatus
    phys_offset: int = -1  # first record
    queue_offset: int = -1  # first record's queue offset
    count: int = 0
    end_phys_offset: int = -1  # just past the last record: sync flush waits for flushed_pos >= this
    msg_ids_text: str = ""  # offset message ids, comma-joined as RocketMQ answers a batch

    @property
    def msg_ids(self) -> list[str]:
        return self.msg_ids_text.split(",") if self.msg_ids_text else []


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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _append_refused(status: AppendStatus) -> PutResult:
    return PutResult(PutMessageStatus.DISK_FULL if status is AppendStatus.DISK_FULL
                     else PutMessageStatus.MESSAGE_ILLEGAL)


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
        # Parked pulls are answered from the newest writes before the reput indexed them
        # (recent_writes.py); not under sync flush, whose consumers read flushed records only.
        self.recent = RecentWrites()
        self._serve_recent = cfg.flush_mode != SYNC_FLUSH
        self._topic_bytes: dict[str, bytes] = {}
        self._floor = FloorWatch(control, self.commitlog, self.cqs)
        self._ready = False
        # A slave's store: only replicated bytes are appended (append_replicated), never messages.
        self.read_only = False
        self._boundary_scan = native_scan_batch()
        # Seal every record with the whole-record CRC property (RocketMQ's enabledAppendPropCRC).
        self.record_crc = cfg.record_crc_enabled
        # Whether the store promises, durably, that its records carry it (record_crc_promise.py).
        self._record_crc_promised = False

    # ---- life cycle ----

    def recover(self, truncate_to: int | None = None) -> RecoveryReport:
        """Run at broker start, before the workers (see recovery.py)."""
        promised = record_crc_promise.read(self.cfg.store_dir)
        report = recover(self.cfg.store_dir, self.commitlog, self.cqs, self.index, self.control,
                         parse_levels(self.cfg.message_delay_levels), truncate_to=truncate_to,
                         record_crc_from=promised)
        self._record_crc_promised = record_crc_promise.settle(
            self.cfg.store_dir, promised, report.end_phys, self.record_crc) is not None
        self._next_offsets = {(cq.topic, cq.queue_id): cq.max_offset() for cq in self.cqs.queues()}
        for cq in self.cqs.queues():
            cq.forget_cache()
        self._ready = True
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
        self._ready = False
        self.commitlog.close()
        self.cqs.close()
        self.index.close()

    # ---- writing ----

    def put_messages(self, topic: str, queue_id: int,
                     messages: Sequence[MessageToStore]) -> PutResult:
        """Append ``messages`` to one queue, consecutively, in one CommitLog segment."""
        if not self._ready or self.read_only:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        topic_bytes = self._topic_bytes.get(topic)
        if topic_bytes is None:
            if not isinstance(topic, str) or not topic:
                return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
            topic_bytes = topic.encode()
            if len(topic_bytes) > fmt.TOPIC_LENGTH_MAX:
                return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
            self._topic_bytes[topic] = topic_bytes
        if not messages or not isinstance(queue_id, int) or not 0 <= queue_id < 1 << 31:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        record_crc = self.record_crc
        try:
            stored = None   # the properties as sent, unless the records store others
            if record_crc or any(fmt.PROPERTY_CRC32_BYTES in m.properties for m in messages):
                stored = [fmt.stored_properties(m.properties, record_crc) for m in messages]
            sizes = fmt.batch_record_sizes(len(topic_bytes), messages, stored)
            for properties in (stored or [m.properties for m in messages]):
                if len(properties) > fmt.PROPERTIES_LENGTH_MAX:
                    return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        except (AttributeError, TypeError):
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if max(sizes) > self.cfg.message_size_bytes_max:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        total = sum(sizes)
        key = (topic, queue_id)
        queue_offset = self._next_offsets.get(key, 0)
        store_ts = _now_ms()
        store_host = self.store_host
        commitlog = self.commitlog
        # Encode at the position the batch will most likely get; re-encode only if the
        # append rolls to the next segment (the phys offsets change).
        guess = commitlog.write_pos
        try:
            data, next_queue_offset = fmt.encode_batch(
                messages, sizes, topic=topic_bytes, queue_id=queue_id,
                queue_offset_first=queue_offset, phys_offset_first=guess,
                store_timestamp_ms=store_ts, store_host=store_host, record_crc=record_crc,
                properties=stored)
        except (struct.error, ValueError, TypeError, AttributeError, OverflowError):
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)

        def fill(buf, pos: int, phys: int) -> None:
            nonlocal data
            if phys != guess:
                data, _ = fmt.encode_batch(
                    messages, sizes, topic=topic_bytes, queue_id=queue_id,
                    queue_offset_first=queue_offset, phys_offset_first=phys,
                    store_timestamp_ms=store_ts, store_host=store_host, record_crc=record_crc,
                    properties=stored)
            buf[pos:pos + total] = data

        outcome = commitlog.append(total, fill)
        if outcome.status is not AppendStatus.OK:
            return _append_refused(outcome.status)
        return self._published(key, queue_offset, next_queue_offset, sizes, outcome.phys_offset)

    def put_message(self, topic: str, queue_id: int, message: MessageToStore) -> PutResult:
        """``put_messages(topic, queue_id, [message])``, the record written by one C call: a single
        send's path. What that call does not take (a half or rolled-back record, a prepared offset,
        a client's own ``__CRC32#`` pair, a topic not yet seen, anything put_messages refuses) goes
        the general way."""
        topic_bytes = self._topic_bytes.get(topic)
        properties = message.properties
        record_crc = self.record_crc
        stored_size = fmt.stored_properties_size(properties, record_crc)
        body = message.body
        size = None if topic_bytes is None or stored_size is None else \
            fmt.FIXED_SIZE + len(topic_bytes) + len(body) + stored_size
        if (size is None or size > self.cfg.message_size_bytes_max or stored_size > fmt.PROPERTIES_LENGTH_MAX
                or message.sys_flag & SYSFLAG_TRANSACTION_MASK or message.prepared_transaction_offset
                or not self._ready or self.read_only or type(queue_id) is not int or not 0 <= queue_id < 1 << 31):
            return self.put_messages(topic, queue_id, [message])   # it also refuses what must be refused
        key = (topic, queue_id)
        queue_offset = self._next_offsets.get(key, 0)
        store_ts = _now_ms()

        def fill(buf, pos: int, phys: int) -> None:
            _native.encode_record(
                buf, pos, size, body, properties, topic_bytes, flag=message.flag,
                reconsume_times=message.reconsume_times, queue_id=queue_id, queue_offset=queue_offset,
                phys_offset=phys, sys_flag=message.sys_flag, born_timestamp_ms=message.born_timestamp_ms,
                born_host=message.born_host, store_timestamp_ms=store_ts, store_host=self.store_host,
                record_crc=record_crc)

        try:   # the helper checks every field before it writes a byte
            outcome = self.commitlog.append(size, fill)
        except (ValueError, TypeError, OverflowError):
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if outcome.status is not AppendStatus.OK:
            return _append_refused(outcome.status)
        return self._published(key, queue_offset, queue_offset + 1, (size,), outcome.phys_offset)

    def _published(self, key: tuple[str, int], queue_offset: int, next_queue_offset: int, sizes,
                   phys: int) -> PutResult:
        """Records of ``sizes`` written from ``phys`` on: made visible to readers, remembered for
        parked pulls, and their offset message ids."""
        self._next_offsets[key] = next_queue_offset
        end = self.commitlog.write_pos
        self.control.write_pos = end  # publish: the bytes are in place
        if self._serve_recent:
            ends = [sizes[0]] if len(sizes) == 1 else list(itertools.accumulate(sizes))
            self.recent.add(key, queue_offset, len(sizes), phys, ends, 0, self.control.dispatched_pos)
        store_host = self.store_host
        if len(sizes) == 1:   # a single send
            return PutResult(PutMessageStatus.PUT_OK, phys, queue_offset, 1, end, offset_msg_id(store_host, phys))
        first = phys
        msg_ids = []
        for size in sizes:
            msg_ids.append(offset_msg_id(store_host, phys))
            phys += size
        return PutResult(PutMessageStatus.PUT_OK, first, queue_offset, len(sizes), end, ",".join(msg_ids))

    def put_batch_body(self, topic: str, queue_id: int, batch_body: bytes, *, sys_flag: int,
                       born_timestamp_ms: int, born_host: bytes) -> PutResult:
        """Append a RocketMQ batch body (``batch_format``) to one queue without decoding it in Python.

        The C helper measures the items, then encodes every record straight into the
        mapped segment: one call per batch instead of Python work per message.
        """
        if not self._ready or self.read_only:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        topic_bytes = self._topic_bytes.get(topic)
        if topic_bytes is None:
            topic_bytes = topic.encode()
            if not topic_bytes or len(topic_bytes) > fmt.TOPIC_LENGTH_MAX:
                return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
            self._topic_bytes[topic] = topic_bytes
        if not 0 <= queue_id < 1 << 31:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        record_crc = self.record_crc
        try:
            count, total = _native.measure_batch(batch_body, len(topic_bytes), record_crc=record_crc)
        except ValueError:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if count == 0:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        key = (topic, queue_id)
        queue_offset = self._next_offsets.get(key, 0)
        store_ts = _now_ms()
        ends = []

        def fill(buf, pos: int, phys: int) -> None:
            _, _, record_ends = _native.encode_batch(
                buf, pos, batch_body, topic_bytes, queue_id, queue_offset, phys, sys_flag,
                born_timestamp_ms, born_host, store_ts, self.store_host, dst_limit=pos + total,
                record_crc=record_crc)
            ends.append(record_ends)

        outcome = self.commitlog.append(total, fill)
        if outcome.status is not AppendStatus.OK:
            return _append_refused(outcome.status)
        self._next_offsets[key] = queue_offset + count
        end = self.commitlog.write_pos
        self.control.write_pos = end
        first = outcome.phys_offset
        # record_ends[i] is the segment position just past record i; record 0 starts at pos0.
        record_ends = ends[0]
        pos0 = record_ends[-1] - total
        if self._serve_recent:
            self.recent.add(key, queue_offset, count, first, record_ends, pos0, self.control.dispatched_pos)
        # One C call for all ids: formatting 256 of them in Python was a third of the broker's time.
        msg_ids_text = _native.offset_msg_ids(self.store_host, first, record_ends, pos0)
        return PutResult(PutMessageStatus.PUT_OK, first, queue_offset, count, end, msg_ids_text)

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

    def append_replicated(self, phys_offset: int, data) -> bool:
        """A slave appends its master's bytes verbatim and publishes write_pos; False if it cannot (disk)."""
        if self._record_crc_promised:   # the master's records, sealed or not as its setting says
            record_crc_promise.withdraw(self.cfg.store_dir)
            self._record_crc_promised = False
        if self.commitlog.append_raw(phys_offset, data) is not AppendStatus.OK:
            return False
        self.control.write_pos = self.commitlog.write_pos
        return True

    # ---- reading ----

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int, tag_hashes: frozenset | None = None, *,
                     joined: bool = False) -> GetResult:
        """Records of one queue from queue offset ``offset`` (see GetMessageStatus).

        ``next_begin_offset`` follows rocketmq-protocol.md §5.4. Only entries the reput
        worker has published (phys + size <= dispatched_pos) count, and with ``joined`` (a pull's
        read) the newest writes past them (``_get_recent``).
        """
        cq = self.cqs.get(topic, queue_id)
        if cq is None:
            recent = self._get_recent(topic, queue_id, offset, max_count, max_bytes, tag_hashes, 0) \
                if joined and self._serve_recent else None
            if recent is not None:
                return recent
            status = (GetMessageStatus.NO_MESSAGE_IN_QUEUE if (topic, queue_id) in self._next_offsets
                      else GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
            return GetResult(status, _EMPTY, 0, 0, 0)
        floor = self.commitlog_floor()  # first: a moved floor resets what refresh_max remembers
        max_offset = cq.refresh_max(self.control.dispatched_pos)
        min_offset = cq.min_offset(floor)
        if offset >= max_offset and joined and self._serve_recent:
            recent = self._get_recent(topic, queue_id, offset, max_count, max_bytes, tag_hashes, min_offset)
            if recent is not None:
                return recent
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

    def _get_recent(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int,
                    tag_hashes, min_offset: int) -> GetResult | None:
        """Records past the ConsumeQueue's end from the newest writes (recent_writes.py): FOUND, or
        OFFSET_OVERFLOW_ONE for an offset the writes reached but cannot serve yet (a consumer they
        served is ahead of the ConsumeQueue, not past the queue); None: ask the ConsumeQueue."""
        key = (topic, queue_id)
        end = self.recent.end_offset(key)
        if not end or offset > end:
            return None
        if tag_hashes is None and offset < end:
            chunks, count = self.recent.select(key, offset, max_count, max_bytes, self.control.write_pos)
            raws = [self.commitlog.read(phys, size) for phys, size in chunks]
            if count and None not in raws:
                return GetResult(GetMessageStatus.FOUND, _EMPTY, offset + count, min_offset, end,
                                 b"".join(raws), count)
        return GetResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, _EMPTY, offset, min_offset, end)

    def commitlog_floor(self) -> int:
        """The CommitLog's min offset (``retention.py``): bytes below it are deleted or about to be."""
        return self._floor.floor()

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.cqs.get(topic, queue_id)
        return cq.min_offset(self.commitlog_floor()) if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Queue offset just past the last entry visible to consumers."""
        cq = self.cqs.get(topic, queue_id)
        self.commitlog_floor()
        return cq.refresh_max(self.control.dispatched_pos) if cq is not None else 0

    def readable_end(self, topic: str, queue_id: int) -> int:
        """Queue offset past the last entry a pull may have served: with the newest writes a pull
        reads before they are dispatched (``_get_recent``), not behind ``max_offset``. A consumer
        may commit up to it."""
        end = self.max_offset(topic, queue_id)
        return max(end, self.recent.end_offset((topic, queue_id))) if self._serve_recent else end

    def queue_next_offset(self, topic: str, queue_id: int) -> int:
        """Queue offset the next put gets (written, maybe not yet visible)."""
        return self._next_offsets.get((topic, queue_id), 0)

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[tuple[int, int, int, int]]:
        """Visible ConsumeQueue entries from ``offset``: (queue offset, phys, size, tag field)."""
        cq = self.cqs.get(topic, queue_id)
        if cq is None:
            return []
        floor = self.commitlog_floor()
        visible = cq.refresh_max(self.control.dispatched_pos)
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
        self.recent.forget_topic(topic)
        return self.cqs.delete_topic(topic)

    def topics_and_queues(self) -> dict[str, list[int]]:
        keys = set(self._next_offsets) | set(self.cqs.discover())
        out: dict[str, list[int]] = {}
        for topic, queue_id in sorted(keys):
            out.setdefault(topic, []).append(queue_id)
        return out
