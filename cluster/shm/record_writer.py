"""The CommitLog's one writer: every record the broker appends goes through ``RecordWriter.put``.

Lives in the broker process, the only writer of CommitLog records and of ``control.write_pos``.
``put(topic, queue_id, records)`` takes either ``MessageToStore`` values (a send, a retry or
dead letter, a delayed message parked and delivered, a transaction's half, commit and op records,
a pop's checkpoint, ack and done records, a revive's copies, a reply) or one ``BatchBody`` (a
producer's batch as it came off the wire). Either way the C helper encodes the records straight
into the mapped segment (``_native.encode_record_into``, a call a record, the segment exported
once a put; ``_native.encode_batch``, a call a batch), after it measured and checked them, so nothing is written for a refused put. The
Python encoder (``record_format.encode``/``encode_batch``) is the tests' oracle: the golden
tests hold the C bytes to it. A slave's only write is ``append_replicated``: its master's bytes
verbatim, never encoded here.

After the bytes are in place the writer publishes them: the queue's next offset and ``write_pos``;
their ConsumeQueue entries follow within the loop turn, or before any read (``queue_writer.py``).
Outcomes are values (``PutResult`` with a ``PutMessageStatus``, RocketMQ's names); a put never
raises for bad input.
"""

from __future__ import annotations

import enum
import itertools
import time
from array import array
from typing import NamedTuple, Sequence

from rocketbox.cluster import _native
from rocketbox.cluster.config import StoreConfig
from rocketbox.cluster.message.ids import offset_msg_id
from rocketbox.cluster.message.properties import encode_properties
from rocketbox.cluster.message.sysflags import (SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED,
                                                SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm import record_crc_promise
from rocketbox.cluster.shm.commitlog import AppendStatus, CommitLog
from rocketbox.cluster.shm.control import ControlBlock

# Sysflags of records that never enter a ConsumeQueue: they store queue offset 0 and take no number.
_NOT_NUMBERED = (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)
_QUEUE_ID_END = 1 << 31


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # set by the broker (sync flush waits)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # set by the broker (sync replication)
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # not recovered yet, or closed
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    DISK_FULL = "DISK_FULL"  # RocketMQ: CREATE_MAPPED_FILE_FAILED / disk full
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class MessageToStore(NamedTuple):
    body: bytes  # as sent (compressed when sys_flag says so)
    flag: int
    # Already encoded (message.properties.encode_properties); the store drops a "__CRC32#" pair and
    # appends its own CRC property (record_format.stored_properties).
    properties: bytes
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes  # 8 bytes: IPv4 + port
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class BatchBody(NamedTuple):
    """A producer's batch as sent (``batch_format``: items back to back), and what its records share."""

    body: bytes
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes


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


_ILLEGAL = PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
_NOT_AVAILABLE = PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _append_refused(status: AppendStatus) -> PutResult:
    return PutResult(PutMessageStatus.DISK_FULL if status is AppendStatus.DISK_FULL
                     else PutMessageStatus.MESSAGE_ILLEGAL)


class RecordWriter:
    """See the module docstring. ``next_offsets`` ((topic, queue id) -> the next queue offset) is
    the store's table, shared: the writer advances it, the store reads and resets it."""

    def __init__(self, cfg: StoreConfig, control: ControlBlock, commitlog: CommitLog,
                 next_offsets: dict[tuple[str, int], int], store_host: bytes):
        self.cfg = cfg
        self.control = control
        self.commitlog = commitlog
        self.next_offsets = next_offsets
        self.store_host = store_host
        self.ready = False   # recovered, and not closed
        # A slave's store: only replicated bytes are appended (append_replicated), never messages.
        self.read_only = False
        # Seal every record with the whole-record CRC property (RocketMQ's enabledAppendPropCRC).
        self.record_crc = cfg.record_crc_enabled
        # From where the store promises, durably, that its records carry it (record_crc_promise.py;
        # None: no promise).
        self.record_crc_from: int | None = None
        self._topic_bytes: dict[str, bytes] = {}

    def put(self, topic: str, queue_id: int, records: Sequence[MessageToStore] | BatchBody) -> PutResult:
        """Append ``records`` to one queue, consecutively, in one CommitLog segment (all or nothing)."""
        if not self.ready or self.read_only:
            return _NOT_AVAILABLE
        topic_bytes = self._topic_bytes.get(topic) or self._new_topic(topic)
        if topic_bytes is None or type(queue_id) is not int or not 0 <= queue_id < _QUEUE_ID_END:
            return _ILLEGAL
        if type(records) is BatchBody:
            return self._put_batch_body(topic, topic_bytes, queue_id, records)
        if not records:
            return _ILLEGAL
        record_crc = self.record_crc
        record_size = _native.record_size
        topic_len = len(topic_bytes)
        try:
            if len(records) == 1:   # most puts: no list to build
                only = records[0]
                sizes = (record_size(len(only.body), only.properties, topic_len, record_crc),)
            else:
                sizes = [record_size(len(m.body), m.properties, topic_len, record_crc) for m in records]
        except (ValueError, TypeError, AttributeError):   # MalformedBatch is a ValueError
            return _ILLEGAL
        if max(sizes) > self.cfg.message_size_bytes_max:
            return _ILLEGAL
        key = (topic, queue_id)
        queue_offset = self.next_offsets.get(key, 0)
        store_ts = _now_ms()
        store_host = self.store_host
        encode = _native.encode_record_into
        next_offset = queue_offset

        def fill(buf, pos: int, phys: int) -> None:
            nonlocal next_offset
            offset = queue_offset
            with _native.writable(buf) as out:   # one export for the put's records
                for m, size in zip(records, sizes):
                    sys_flag = m.sys_flag
                    encode(out, pos, size, m.body, m.properties, topic_bytes, m.flag, m.reconsume_times, queue_id,
                           offset, phys, sys_flag, m.born_timestamp_ms, m.born_host, store_ts, store_host,
                           m.prepared_transaction_offset, record_crc)
                    offset += sys_flag & SYSFLAG_TRANSACTION_MASK not in _NOT_NUMBERED
                    pos += size
                    phys += size
            next_offset = offset

        try:   # the helper checks every field of a record before it writes a byte of it; nothing is published
            outcome = self.commitlog.append(sum(sizes), fill)
        except (ValueError, TypeError, OverflowError, AttributeError):
            return _ILLEGAL
        if outcome.status is not AppendStatus.OK:
            return _append_refused(outcome.status)
        phys = outcome.phys_offset
        if len(sizes) == 1:   # a single send
            return self._published(key, queue_offset, next_offset, 1, phys, offset_msg_id(store_host, phys))
        ends = array("q", itertools.accumulate(sizes))
        return self._published(key, queue_offset, next_offset, len(sizes), phys,
                               _native.offset_msg_ids(store_host, phys, ends, 0))

    def put_encoded(self, queues: list, size: int, encode) -> PutResult:
        """Append the records of one or more queues (``queues``: (topic, queue id, records) each, their
        records back to back in that order), ``size`` bytes in all, that the caller's encoder writes in
        one call (``encode(buf, pos, phys_offset, queue_offsets, store_timestamp_ms, store_host)``, a
        first queue offset a queue: the remoting door's send lane, ``broker/send_lane.py``, its records
        checked and measured before), published as ``put`` publishes them. The result's queue offset
        is the first queue's; ``msg_ids_text`` is left empty: the caller has every record's place."""
        if not self.ready or self.read_only:
            return _NOT_AVAILABLE
        keys, offsets, next_offsets, records = [], [], self.next_offsets, 0
        for topic, queue_id, count in queues:
            if (self._topic_bytes.get(topic) or self._new_topic(topic)) is None or type(queue_id) is not int \
                    or not 0 <= queue_id < _QUEUE_ID_END or count <= 0:
                return _ILLEGAL
            key = (topic, queue_id)
            keys.append(key)
            offsets.append(next_offsets.get(key, 0))
            records += count
        store_ts, store_host = _now_ms(), self.store_host
        try:
            outcome = self.commitlog.append(
                size, lambda buf, pos, phys: encode(buf, pos, phys, offsets, store_ts, store_host))
        except (ValueError, TypeError, OverflowError):
            return _ILLEGAL
        if outcome.status is not AppendStatus.OK:
            return _append_refused(outcome.status)
        for key, offset, (_topic, _queue_id, count) in zip(keys, offsets, queues):
            next_offsets[key] = offset + count
        end = self.commitlog.write_pos
        self.control.write_pos = end  # publish: the bytes are in place
        return PutResult(PutMessageStatus.PUT_OK, outcome.phys_offset, offsets[0], records, end, "")

    def _new_topic(self, topic: str) -> bytes | None:
        if not isinstance(topic, str) or not topic:
            return None
        topic_bytes = topic.encode()
        if len(topic_bytes) > fmt.TOPIC_LENGTH_MAX:
            return None
        self._topic_bytes[topic] = topic_bytes
        return topic_bytes

    def _put_batch_body(self, topic: str, topic_bytes: bytes, queue_id: int, batch: BatchBody) -> PutResult:
        """The C helper measures the items, then encodes every record straight into the mapped
        segment in one call: no Python work per message."""
        record_crc = self.record_crc
        try:
            count, total = _native.measure_batch(batch.body, len(topic_bytes), record_crc=record_crc)
        except (ValueError, TypeError):
            return _ILLEGAL
        if count == 0:
            return _ILLEGAL
        key = (topic, queue_id)
        queue_offset = self.next_offsets.get(key, 0)
        store_ts = _now_ms()
        ends = []

        def fill(buf, pos: int, phys: int) -> None:
            _, _, record_ends = _native.encode_batch(
                buf, pos, batch.body, topic_bytes, queue_id, queue_offset, phys, batch.sys_flag,
                batch.born_timestamp_ms, batch.born_host, store_ts, self.store_host, dst_limit=pos + total,
                record_crc=record_crc)
            ends.append(record_ends)

        try:
            outcome = self.commitlog.append(total, fill)
        except (ValueError, TypeError, OverflowError):
            return _ILLEGAL
        if outcome.status is not AppendStatus.OK:
            return _append_refused(outcome.status)
        # record_ends[i] is the segment position just past record i; record 0 starts at pos0.
        record_ends = ends[0]
        pos0 = record_ends[-1] - total
        first = outcome.phys_offset
        # One C call for all ids: formatting 256 of them in Python was a third of the broker's time.
        return self._published(key, queue_offset, queue_offset + count, count, first,
                               _native.offset_msg_ids(self.store_host, first, record_ends, pos0))

    def _published(self, key: tuple[str, int], queue_offset: int, next_queue_offset: int, count: int, phys: int,
                   msg_ids_text: str) -> PutResult:
        """``count`` records written from ``phys`` on: published to the other processes."""
        self.next_offsets[key] = next_queue_offset
        end = self.commitlog.write_pos
        self.control.write_pos = end  # publish: the bytes are in place
        return PutResult(PutMessageStatus.PUT_OK, phys, queue_offset, count, end, msg_ids_text)

    def append_replicated(self, phys_offset: int, data, record_crc_from: int | None = None) -> bool:
        """A slave appends its master's bytes verbatim and publishes write_pos; False if it cannot (disk).
        ``record_crc_from``: the master's promise (record_crc_promise.py), made this store's first."""
        if record_crc_from != self.record_crc_from:
            record_crc_promise.adopt(self.cfg.store_dir, record_crc_from)
            self.record_crc_from = record_crc_from
        if self.commitlog.append_raw(phys_offset, data) is not AppendStatus.OK:
            return False
        self.control.write_pos = self.commitlog.write_pos
        return True
