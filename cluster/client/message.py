"""What applications send and receive."""

from __future__ import annotations

import enum
import os
import socket
import threading
import zlib
from dataclasses import dataclass, field

from cluster.shm import commitlog_format as fmt


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    def keys_text(self) -> str | None:
        if self.keys is None:
            return None
        return self.keys if isinstance(self.keys, str) else " ".join(self.keys)


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


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


@dataclass
class MessageExt:
    """A received message: the record's fields plus its queue and broker."""

    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    phys_offset: int
    sys_flag: int
    flag: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    reconsume_times: int
    offset_msg_id: str
    broker_name: str = ""

    @property
    def msg_id(self) -> str:
        return self.properties.get(fmt.PROPERTY_UNIQ_KEY, self.offset_msg_id)

    @property
    def tags(self) -> str | None:
        return self.properties.get(fmt.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(fmt.PROPERTY_KEYS)
        return raw.split(" ") if raw else []

    @classmethod
    def from_record(cls, rec: fmt.Record, broker_name: str = "") -> "MessageExt":
        body = rec.body
        if rec.sys_flag & fmt.SYSFLAG_COMPRESSED:
            body = zlib.decompress(body)
        return cls(rec.topic, body, rec.properties, rec.queue_id, rec.queue_offset, rec.phys_offset,
                   rec.sys_flag, rec.flag, rec.born_timestamp_ms, rec.store_timestamp_ms,
                   rec.reconsume_times, rec.offset_msg_id, broker_name)


def decode_messages(body: bytes, broker_name: str = "") -> list[MessageExt]:
    return [MessageExt.from_record(rec, broker_name) for rec in fmt.iter_records(body)]


class UniqueIdMaker:
    """UNIQ_KEY: 32 upper-case hex chars, unique across hosts, processes and restarts.

    16 bytes like RocketMQ's MessageClientIDSetter, laid out for uniqueness without a
    clock: IPv4 (4) + pid (2) + a random per-process salt (4, so a reused pid differs)
    + a 48-bit counter (6, never wraps in practice). Fork-safe: a child re-salts.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = -1
        self._counter = 0
        self._prefix = b""

    def _reset(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = b"\x7f\x00\x00\x01"
        self._prefix = (ip + (os.getpid() & 0xFFFF).to_bytes(2, "big") + os.urandom(4)).hex().upper()
        self._pid = os.getpid()
        self._counter = 0

    def next(self) -> str:
        return self.next_many(1)[0]

    def next_many(self, count: int) -> list[str]:
        """``count`` fresh ids for one batch: one lock and one pid check for all of them."""
        with self._lock:
            if self._pid != os.getpid():
                self._reset()
            first = self._counter + 1
            self._counter += count
        prefix = self._prefix
        return [f"{prefix}{c:012X}" for c in range(first, first + count)]


UNIQUE_IDS = UniqueIdMaker()
