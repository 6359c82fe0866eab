"""What applications send and receive."""

from __future__ import annotations

import enum
import logging
import os
import socket
import threading
from dataclasses import dataclass, field

from rocketbox.cluster import _native
from rocketbox.cluster.protocol import MessageQueue  # noqa: F401 (the client's public name for it)
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import offset_msg_id, unique_id, unique_id_prefix
from rocketbox.cluster.message.properties import (PROPERTY_DELAY, PROPERTY_KEYS, PROPERTY_RETRY_TOPIC, PROPERTY_TAGS,
                                                  PROPERTY_TIMER_DELIVER_MS, PROPERTY_UNIQ_KEY)
from rocketbox.cluster.message.sysflags import SYSFLAG_COMPRESSED
from rocketbox.cluster.message.compression import inflate

log = logging.getLogger(__name__)


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    def set_delay_level(self, level: int) -> "Message":
        """Deliver after delay level ``level`` (1..18: 1s 5s 10s 30s 1m ... 2h by default)."""
        self.properties[PROPERTY_DELAY] = str(int(level))
        return self

    def set_deliver_time_ms(self, epoch_ms: int) -> "Message":
        """Deliver at this time, ms since the epoch (RocketMQ 5's timer message), never before."""
        self.properties[PROPERTY_TIMER_DELIVER_MS] = str(int(epoch_ms))
        return self

    def keys_text(self) -> str | None:
        if self.keys is None:
            return None
        return self.keys if isinstance(self.keys, str) else " ".join(self.keys)


class SendStatus(enum.Enum):
    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str            # the client-made UNIQ_KEY
    offset_msg_id: str     # store host + CommitLog offset, made by the broker
    queue: MessageQueue
    queue_offset: int


class MessageExt:
    """A received message: a view over one record of a pull response.

    The fields consumers read most (body, topic, queue, offsets, flags) are set when
    the response is scanned; properties, hosts and born time are decoded from the
    record only when asked for, which keeps per-message work off the consume path.
    """

    __slots__ = ("topic", "body", "queue_id", "queue_offset", "phys_offset", "sys_flag",
                 "store_timestamp_ms", "broker_name", "_raw", "_pos", "_properties", "_decoded")

    def __init__(self, raw: bytes, pos: int, topic: str, body: bytes, queue_id: int, queue_offset: int,
                 phys_offset: int, sys_flag: int, store_timestamp_ms: int, broker_name: str = ""):
        self._raw = raw
        self._pos = pos
        self.topic = topic
        self.body = body
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.phys_offset = phys_offset
        self.sys_flag = sys_flag
        self.store_timestamp_ms = store_timestamp_ms
        self.broker_name = broker_name
        self._properties = None
        self._decoded = None

    def _record(self) -> fmt.Record:
        # Decoded once, on the first read of a field the scan did not fill in.
        if self._decoded is None:
            self._decoded = fmt.decode_at(self._raw, self._pos, check_crc=False)
        return self._decoded

    @property
    def properties(self) -> dict[str, str]:
        if self._properties is None:
            self._properties = self._record().properties
        return self._properties

    @property
    def flag(self) -> int:
        return self._record().flag

    @property
    def born_timestamp_ms(self) -> int:
        return self._record().born_timestamp_ms

    @property
    def reconsume_times(self) -> int:
        return self._record().reconsume_times

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self._record().store_host, self.phys_offset)

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_UNIQ_KEY) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS)
        return raw.split(" ") if raw else []

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"body={self.body[:40]!r})")


def restore_retried_topic(message: MessageExt) -> None:
    """A message redelivered through %RETRY%<group> shows its original topic (RETRY_TOPIC)."""
    if message.topic.startswith(RETRY_TOPIC_PREFIX):
        original = message.properties.get(PROPERTY_RETRY_TOPIC)
        if original:
            message.topic = original


def decode_messages(raw: bytes, broker_name: str = "") -> list[MessageExt]:
    """The messages of a pull (or query) response body: concatenated CommitLog records."""
    out = []
    topics: dict[bytes, str] = {}
    pos, end = 0, len(raw)
    while pos < end:
        # No record is shorter than FIXED_SIZE: that bounds the rows this response can hold.
        scan = _native.scan_records(raw, pos, end, max_rows=min(4096, (end - pos) // fmt.FIXED_SIZE + 1))
        columns = [iter(scan.rows)] * _native.SCAN_COLUMNS
        append = out.append
        for (rec_pos, _size, queue_id, queue_offset, phys, sys_flag, store_ts, body_pos, body_len,
             topic_pos, topic_len, _props_pos, _props_len) in zip(*columns):
            topic_raw = raw[topic_pos:topic_pos + topic_len]
            topic = topics.get(topic_raw)
            if topic is None:
                topic = topics[topic_raw] = topic_raw.decode("utf-8", "replace")
            body = raw[body_pos:body_pos + body_len]
            if sys_flag & SYSFLAG_COMPRESSED:
                try:
                    body = inflate(body, sys_flag)
                except ValueError as exc:
                    # Flagged compressed but not inflating: deliver it as stored rather than stall the queue.
                    log.warning("message at %s:%d offset %d: %s; delivering the stored bytes", topic, queue_id,
                                queue_offset, exc)
            append(MessageExt(raw, rec_pos, topic, body, queue_id, queue_offset, phys, sys_flag, store_ts,
                              broker_name))
        if scan.count == 0 or scan.next_pos <= pos:
            if scan.next_pos < end:
                raise ValueError(f"not a record at {scan.next_pos} of a {end}-byte response ({scan.stop})")
            break
        pos = scan.next_pos
    return out


class UniqueIdMaker:
    """UNIQ_KEY: 32 upper-case hex chars, unique across hosts, processes and restarts.

    The layout is message/ids.py's unique_id_prefix + unique_id (a 48-bit counter that never
    wraps in practice). Fork-safe: a child re-salts.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = -1
        self._counter = 0
        self._prefix = b""
        # A forked child takes a prefix of its own at its first id; no getpid() per message.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._pid = -1
        self._lock = threading.Lock()   # the parent may have held it while forking

    def _reset(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = b"\x7f\x00\x00\x01"
        self._prefix = unique_id_prefix(ip, os.getpid(), os.urandom(4))
        self._pid = os.getpid()
        self._counter = 0

    def next(self) -> str:
        return unique_id(*self.reserve(1))

    def reserve(self, count: int) -> tuple[str, int]:
        """(prefix, first counter) of ``count`` fresh ids: id i is prefix + 12 hex digits of first + i."""
        with self._lock:
            if self._pid < 0:
                self._reset()
            first = self._counter + 1
            self._counter += count
            return self._prefix, first


UNIQUE_IDS = UniqueIdMaker()
