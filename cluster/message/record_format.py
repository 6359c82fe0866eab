"""The message record: RocketMQ's byte layout of one message as the CommitLog stores it and a pull,
a query or a view delivers it, the only place that knows it (RocketMQ's MessageDecoder, which its
``common`` module shares between the client and the store).

Pure: no I/O, and nothing of the store: the reput, recovery, replication, the client and the proxy
read records with these functions; nobody else unpacks one. What only a CommitLog file holds (the
end-of-file blank, what a position of a segment can hold) is ``shm/commitlog_format.py``'s. The
broker writes every record through the C encoder (``_native/record_write.c``, from
``shm/record_writer.py``), whose constants are generated from ``RECORD_HEAD_FIELDS`` below;
``encode``/``encode_batch`` here are the oracle the tests hold its bytes to.

Record, big-endian (SPEC §4), 91 fixed bytes + body + topic + properties:

| off | field | bytes |
| --- | --- | --- |
| 0 | TOTALSIZE (whole record) | 4 |
| 4 | MAGICCODE (0xdaa320a7) | 4 |
| 8 | BODYCRC (crc32(body) & 0x7FFFFFFF) | 4 |
| 12 | QUEUEID | 4 |
| 16 | FLAG | 4 |
| 20 | QUEUEOFFSET | 8 |
| 28 | PHYSICALOFFSET | 8 |
| 36 | SYSFLAG | 4 |
| 40 | BORNTIMESTAMP ms | 8 |
| 48 | BORNHOST (IPv4 4 + port 4) | 8 |
| 56 | STORETIMESTAMP ms | 8 |
| 64 | STOREHOSTADDRESS (IPv4 4 + port 4) | 8 |
| 72 | RECONSUMETIMES | 4 |
| 76 | PREPARED TRANSACTION OFFSET | 8 |
| 84 | BODY length + body | 4 + n |
| .. | TOPIC length (signed byte) + topic | 1 + n |
| .. | PROPERTIES length (int16) + properties | 2 + n |

Whole-record CRC (RocketMQ's ``enabledAppendPropCRC``, CommitLog.CRC32_RESERVED_LEN): with the
broker setting on, a record's properties end with one more property, 20 bytes reserved at the
record's very end:

    __CRC32#  \\x01  ten ASCII digits  \\x02

The digits are crc32(record[0 : TOTALSIZE - 20]) & 0x7FFFFFFF in decimal, least significant digit
first, padded with '0' on the right (MessageDecoder.createCrc32 writes them so; the reader
accumulates them from the last to the first): 123 is ``3210000000``. The CRC covers every byte of
the record before the property, so a torn write in the topic, properties or header is seen, not
only one in the body. Properties that do not end with \\x02 get one before it. Any ``__CRC32#``
pair the properties held before (sent by a client, or copied from a stored record) is dropped
first (RocketMQ's asyncPutMessage deletes it). ``decode_at(check_crc=True)`` verifies the CRC of a
record that carries the property; a record without it is checked on its body CRC alone.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from rocketbox.cluster.message.ids import offset_msg_id
from rocketbox.cluster.field_tables import offsets_of, struct_of
from rocketbox.cluster.message.properties import NAME_VALUE_SEPARATOR, PROPERTY_CRC32, decode_properties
from rocketbox.cluster.message.sysflags import (SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED,
                                                SYSFLAG_TRANSACTION_ROLLBACK)

MAGIC = 0xDAA320A7
# MAGIC as the signed int the head struct yields.
MAGIC_SIGNED = MAGIC - (1 << 32)

# Everything up to and including the body length field, in order (the table above; the native
# helper's OFF_* constants are generated from it).
RECORD_HEAD_FIELDS = (
    ("TOTALSIZE", "i"), ("MAGIC", "i"), ("BODYCRC", "i"), ("QUEUEID", "i"), ("FLAG", "i"),
    ("QUEUEOFFSET", "q"), ("PHYSICALOFFSET", "q"), ("SYSFLAG", "i"), ("BORNTIMESTAMP", "q"),
    ("BORNHOST", "8s"), ("STORETIMESTAMP", "q"), ("STOREHOST", "8s"), ("RECONSUMETIMES", "i"),
    ("PREPAREDOFFSET", "q"), ("BODYLEN", "i"),
)
HEAD = struct_of(RECORD_HEAD_FIELDS)
HEAD_OFFSETS = offsets_of(RECORD_HEAD_FIELDS)
HEAD_SIZE = HEAD.size  # 88
FIXED_SIZE = HEAD_SIZE + 1 + 2  # 91: + topic length byte + properties length
# TOTALSIZE and MAGICCODE: what tells a record from zeros or from anything else.
SIZE_AND_MAGIC = struct.Struct(">ii")

OFF_TOTALSIZE = HEAD_OFFSETS["TOTALSIZE"]
OFF_MAGIC = HEAD_OFFSETS["MAGIC"]
OFF_BODYCRC = HEAD_OFFSETS["BODYCRC"]
OFF_QUEUEID = HEAD_OFFSETS["QUEUEID"]
OFF_QUEUEOFFSET = HEAD_OFFSETS["QUEUEOFFSET"]
OFF_PHYSICALOFFSET = HEAD_OFFSETS["PHYSICALOFFSET"]
OFF_SYSFLAG = HEAD_OFFSETS["SYSFLAG"]
OFF_STORETIMESTAMP = HEAD_OFFSETS["STORETIMESTAMP"]
OFF_BODY = HEAD_SIZE

TOPIC_LENGTH_MAX = 127
PROPERTIES_LENGTH_MAX = 32767

RECORD_CRC_MASK = 0x7FFFFFFF
RECORD_CRC_DIGITS = 10
RECORD_CRC_NAME = f"{PROPERTY_CRC32}{NAME_VALUE_SEPARATOR}".encode()
RECORD_CRC_SIZE = len(RECORD_CRC_NAME) + RECORD_CRC_DIGITS + 1  # 20: CommitLog.CRC32_RESERVED_LEN
# What an encoder reserves; sealing overwrites the digits.
RECORD_CRC_PLACEHOLDER = RECORD_CRC_NAME + b"0" * RECORD_CRC_DIGITS + b"\x02"
PROPERTY_CRC32_BYTES = PROPERTY_CRC32.encode()


def delivered_records(payload: bytes) -> bytes:
    """Records as consumers get them (a pull's, a query's or a view's body): each record's whole-record
    CRC property, where its properties end with one, left out and TOTALSIZE and the properties length
    made 20 less; the rest byte for byte. The property proves the stored bytes whole (recovery, the
    slaves' copies); RocketMQ 4 never delivers it and consumers would show it as a property of the
    message. ValueError when ``payload`` is not whole records back to back. ``_native.delivered_records``
    is the C twin the broker uses."""
    out = []
    pos = 0
    while pos < len(payload):
        if len(payload) - pos < FIXED_SIZE:
            raise ValueError(f"a record cut short at {pos}")
        total, = struct.unpack_from(">i", payload, pos)
        body_len, = struct.unpack_from(">i", payload, pos + OFF_BODY - 4)
        if not FIXED_SIZE <= total <= len(payload) - pos or not 0 <= body_len <= total - FIXED_SIZE:
            raise ValueError(f"not a record at {pos}")
        topic_at = pos + OFF_BODY + body_len
        props_at = topic_at + 1 + payload[topic_at] + 2
        if payload[topic_at] > TOPIC_LENGTH_MAX or props_at > pos + total:
            raise ValueError(f"not a record at {pos}")
        props_len, = struct.unpack_from(">H", payload, props_at - 2)
        if props_at + props_len != pos + total:
            raise ValueError(f"not a record at {pos}")
        props = payload[props_at:props_at + props_len]
        tail = props[-RECORD_CRC_SIZE:]
        if (len(props) >= RECORD_CRC_SIZE and tail.startswith(RECORD_CRC_NAME) and tail.endswith(b"\x02")
                and tail[len(RECORD_CRC_NAME):-1].isdigit()
                and (len(props) == RECORD_CRC_SIZE or props[-RECORD_CRC_SIZE - 1] == 2)):
            record = bytearray(payload[pos:pos + total - RECORD_CRC_SIZE])
            struct.pack_into(">i", record, 0, total - RECORD_CRC_SIZE)
            struct.pack_into(">H", record, props_at - 2 - pos, props_len - RECORD_CRC_SIZE)
            out.append(bytes(record))
        else:
            out.append(payload[pos:pos + total])
        pos += total
    return b"".join(out)


def body_crc(body: bytes) -> int:
    """BODYCRC as RocketMQ stores it: CRC32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_crc_property(crc: int) -> bytes:
    """The 20 bytes that end a sealed record: ``__CRC32#``, \\x01, the digits of ``crc`` least
    significant first (zero-padded on the right), \\x02."""
    return RECORD_CRC_NAME + (b"%010d" % (crc & RECORD_CRC_MASK))[::-1] + b"\x02"


def without_record_crc(properties: bytes) -> bytes:
    """``properties`` without any ``__CRC32#`` pair (a client's, or one copied from a stored record)."""
    if PROPERTY_CRC32_BYTES not in properties:
        return properties
    kept = [pair for pair in properties.split(b"\x02")
            if pair.partition(b"\x01")[0] != PROPERTY_CRC32_BYTES]
    return b"\x02".join(kept)


def stored_properties(properties: bytes, record_crc: bool) -> bytes:
    """The properties a record stores for ``properties`` as sent: any ``__CRC32#`` pair dropped and,
    with ``record_crc``, the whole-record CRC property's 20 bytes reserved at the end (after a
    closing \\x02 the text may lack), to be sealed once every other byte of the record is in place."""
    properties = without_record_crc(properties)
    if not record_crc:
        return properties
    if properties and properties[-1] != 2:
        properties += b"\x02"
    return properties + RECORD_CRC_PLACEHOLDER


def stored_properties_size(properties: bytes, record_crc: bool) -> int | None:
    """``len(stored_properties(properties, record_crc))`` without making them; None when the
    properties hold a ``__CRC32#`` pair (what dropping it leaves is stored_properties' to say)."""
    if PROPERTY_CRC32_BYTES in properties:
        return None
    if not record_crc:
        return len(properties)
    return len(properties) + RECORD_CRC_SIZE + (1 if properties and properties[-1] != 2 else 0)


def seal_record(buf, pos: int, size: int) -> None:
    """Write the CRC property of the record at ``buf[pos:pos + size]``, whose properties end with
    the reserved 20 bytes: the CRC of every byte before them."""
    end = pos + size - RECORD_CRC_SIZE
    buf[end:pos + size] = record_crc_property(zlib.crc32(buf[pos:end]))


def stored_record_crc(properties) -> int | None:
    """The whole-record CRC a record's properties end with; None when they end with no CRC property;
    -1 when they end with its name but not with ten digits and \\x02 (garbled)."""
    n = len(properties)
    if n < RECORD_CRC_SIZE or bytes(properties[n - RECORD_CRC_SIZE:n - RECORD_CRC_SIZE + len(RECORD_CRC_NAME)]) \
            != RECORD_CRC_NAME:
        return None
    if n > RECORD_CRC_SIZE and properties[n - RECORD_CRC_SIZE - 1] != 2:
        return None   # "__CRC32#" ends the name of another pair: not the CRC property
    digits = bytes(properties[n - RECORD_CRC_DIGITS - 1:n - 1])
    if properties[n - 1] != 2 or not (digits.isascii() and digits.isdigit()):
        return -1
    value = int(digits[::-1])
    return value if value <= RECORD_CRC_MASK else -1


class Record(NamedTuple):
    """One decoded message record. ``body`` is as stored (still compressed if SYSFLAG says so)."""

    total_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    phys_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes
    store_timestamp_ms: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes

    @property
    def properties(self) -> dict[str, str]:
        return decode_properties(self.properties_raw)

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.phys_offset)


class Incomplete(NamedTuple):
    """Fewer bytes than the record needs are available (end of data, or a torn tail)."""


class Corrupt(NamedTuple):
    reason: str


def record_size(body_len: int, topic_len: int, properties_len: int) -> int:
    return FIXED_SIZE + body_len + topic_len + properties_len


def encode_into(buf, pos: int, *, queue_id: int, flag: int, queue_offset: int, phys_offset: int,
                sys_flag: int, born_timestamp_ms: int, born_host: bytes, store_timestamp_ms: int,
                store_host: bytes, reconsume_times: int, prepared_transaction_offset: int,
                body: bytes, topic: bytes, properties: bytes, crc: int | None = None,
                record_crc: bool = False) -> int:
    """Write one record at ``buf[pos:]``; return its size. ``topic`` and ``properties`` are bytes,
    the properties as stored (``stored_properties``). With ``record_crc`` their last 20 bytes are the
    reserved CRC property, sealed here once the rest is written."""
    if len(topic) > TOPIC_LENGTH_MAX:
        raise ValueError(f"topic is {len(topic)} bytes, more than {TOPIC_LENGTH_MAX}")
    if len(properties) > PROPERTIES_LENGTH_MAX:
        raise ValueError(f"properties are {len(properties)} bytes, more than {PROPERTIES_LENGTH_MAX}")
    size = record_size(len(body), len(topic), len(properties))
    HEAD.pack_into(buf, pos, size, MAGIC_SIGNED, body_crc(body) if crc is None else crc, queue_id, flag,
                   queue_offset, phys_offset, sys_flag, born_timestamp_ms, born_host,
                   store_timestamp_ms, store_host, reconsume_times, prepared_transaction_offset,
                   len(body))
    p = pos + HEAD_SIZE
    buf[p:p + len(body)] = body
    p += len(body)
    buf[p] = len(topic)
    p += 1
    buf[p:p + len(topic)] = topic
    p += len(topic)
    buf[p:p + 2] = len(properties).to_bytes(2, "big")
    p += 2
    buf[p:p + len(properties)] = properties
    if record_crc:
        if len(properties) < RECORD_CRC_SIZE:
            raise ValueError("record_crc needs properties that end with the reserved CRC property")
        seal_record(buf, pos, size)
    return size


def encode(**fields) -> bytes:
    """One record as bytes (tests, replication, the client's fake brokers)."""
    size = record_size(len(fields["body"]), len(fields["topic"]), len(fields["properties"]))
    buf = bytearray(size)
    encode_into(buf, 0, **fields)
    return bytes(buf)


def decode_at(buf, pos: int, limit: int | None = None, *, check_crc: bool = True):
    """Decode the record at ``buf[pos:]``, reading no further than ``limit``.

    Returns ``Record``, ``Incomplete`` (zeros, or not enough bytes) or ``Corrupt`` (bad magic,
    size or CRC). ``check_crc``: the body CRC, and the whole-record CRC when the record carries
    one. (A CommitLog segment may also hold its end-of-file blank there:
    ``shm/commitlog_format.decode_segment_at`` reads a segment.)
    """
    end = len(buf) if limit is None else min(limit, len(buf))
    if end - pos < SIZE_AND_MAGIC.size:
        return Incomplete()
    total_size, magic = SIZE_AND_MAGIC.unpack_from(buf, pos)
    if total_size == 0 and magic == 0:
        return Incomplete()
    if magic != MAGIC_SIGNED:
        return Corrupt(f"bad magic 0x{magic & 0xFFFFFFFF:08x} at {pos}")
    if total_size < FIXED_SIZE:
        return Corrupt(f"total size {total_size} below {FIXED_SIZE}")
    if end - pos < total_size:
        return Incomplete()
    (total_size, _, crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ts, born_host,
     store_ts, store_host, reconsume_times, prepared_offset, body_len) = HEAD.unpack_from(buf, pos)
    p = pos + HEAD_SIZE
    if body_len < 0 or p + body_len + 3 > pos + total_size:
        return Corrupt(f"body length {body_len} does not fit in record of {total_size}")
    body = bytes(buf[p:p + body_len])
    p += body_len
    topic_len = buf[p]
    p += 1
    if topic_len > TOPIC_LENGTH_MAX or p + topic_len + 2 > pos + total_size:
        return Corrupt(f"topic length {topic_len} does not fit")
    topic = bytes(buf[p:p + topic_len]).decode("utf-8", "replace")
    p += topic_len
    props_len = int.from_bytes(buf[p:p + 2], "big")
    p += 2
    if p + props_len != pos + total_size:
        return Corrupt(f"properties length {props_len} does not match total size {total_size}")
    props = bytes(buf[p:p + props_len])
    if check_crc:
        if body_crc(body) != crc:
            return Corrupt(f"body CRC mismatch at {pos}")
        stored = stored_record_crc(props)
        if stored is not None:
            if stored < 0:
                return Corrupt(f"garbled CRC property at {pos}")
            if zlib.crc32(buf[pos:pos + total_size - RECORD_CRC_SIZE]) & RECORD_CRC_MASK != stored:
                return Corrupt(f"record CRC mismatch at {pos}")
    return Record(total_size, crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ts,
                  born_host, store_ts, store_host, reconsume_times, prepared_offset, body, topic, props)


def iter_records(buf, *, check_crc: bool = False):
    """Records of a concatenation (a pull response body). Stops at the first non-record."""
    pos = 0
    n = len(buf)
    while pos < n:
        rec = decode_at(buf, pos, n, check_crc=check_crc)
        if not isinstance(rec, Record):
            raise ValueError(f"not a record at {pos}: {rec!r}")
        yield rec
        pos += rec.total_size


def total_size_at(buf, pos: int) -> int:
    """TOTALSIZE of the record (or a CommitLog's end-of-file blank) at ``buf[pos:]``."""
    return int.from_bytes(buf[pos:pos + 4], "big", signed=True)


def phys_offset_at(buf, pos: int = 0) -> int:
    """PHYSICALOFFSET of the record at ``buf[pos:]`` (where it sits in the CommitLog)."""
    return int.from_bytes(buf[pos + OFF_PHYSICALOFFSET:pos + OFF_PHYSICALOFFSET + 8], "big", signed=True)


_TRANSACTION_HIDDEN = (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)


def batch_record_sizes(topic_len: int, messages, properties=None) -> list[int]:
    """Record size of each message (objects with ``body`` and ``properties`` bytes); ``properties``,
    when given, are what the records store instead (``stored_properties`` of each)."""
    fixed = FIXED_SIZE + topic_len
    if properties is None:
        return [fixed + len(m.body) + len(m.properties) for m in messages]
    return [fixed + len(m.body) + len(p) for m, p in zip(messages, properties)]


def encode_batch(messages, sizes, *, topic: bytes, queue_id: int, queue_offset_first: int,
                 phys_offset_first: int, store_timestamp_ms: int,
                 store_host: bytes, record_crc: bool = False, properties=None) -> tuple[bytes, int]:
    """Consecutive records of one queue as one bytes object, and the next queue offset: the oracle
    the C encoder's bytes are tested against (the broker writes through ``record_writer.py``).

    ``messages`` have body, flag, properties (bytes), sys_flag, born_timestamp_ms,
    born_host, reconsume_times, prepared_transaction_offset; ``sizes`` come from
    ``batch_record_sizes``. Queue offsets count up from ``queue_offset_first``, except
    that a transaction PREPARED or ROLLBACK record gets queue offset 0 and takes no
    number (RocketMQ CommitLog.doAppend: it never enters a ConsumeQueue).
    ``properties``, when given, are what the records store instead of each ``m.properties``;
    ``record_crc``: the stored properties end with the reserved CRC property
    (``stored_properties``), sealed here. Raises struct.error / ValueError / TypeError for
    out-of-range fields.
    """
    if len(topic) > TOPIC_LENGTH_MAX:
        raise ValueError(f"topic is {len(topic)} bytes, more than {TOPIC_LENGTH_MAX}")
    pack = HEAD.pack
    crc32 = zlib.crc32
    topic_part = bytes((len(topic),)) + topic
    parts = []
    append = parts.append
    queue_offset = queue_offset_first
    phys = phys_offset_first
    stored = (m.properties for m in messages) if properties is None else properties
    for m, size, props in zip(messages, sizes, stored):
        body = m.body
        sys_flag = m.sys_flag
        if sys_flag & SYSFLAG_TRANSACTION_MASK in _TRANSACTION_HIDDEN:
            record_queue_offset = 0
        else:
            record_queue_offset = queue_offset
            queue_offset += 1
        head = pack(size, MAGIC_SIGNED, crc32(body) & 0x7FFFFFFF, queue_id, m.flag,
                    record_queue_offset, phys, sys_flag, m.born_timestamp_ms, m.born_host,
                    store_timestamp_ms, store_host, m.reconsume_times,
                    m.prepared_transaction_offset, len(body))
        props_length = len(props).to_bytes(2, "big")
        append(head)
        append(body)
        append(topic_part)
        append(props_length)
        if record_crc:
            if len(props) < RECORD_CRC_SIZE:
                raise ValueError("record_crc needs properties that end with the reserved CRC property")
            covered = props[:-RECORD_CRC_SIZE]
            append(covered)
            append(record_crc_property(
                crc32(covered, crc32(props_length, crc32(topic_part, crc32(body, crc32(head)))))))
        else:
            append(props)
        phys += size
    return b"".join(parts), queue_offset
