"""The batch body: RocketMQ's encoding of many messages in one send, the only place that knows it.

Pure: no I/O; beside the stdlib it reads only the record's layout (``record_format``), the
properties' text and the format errors. The producer builds a batch
with ``encode_items``; the broker turns it into CommitLog records, in C with
``cluster._native.encode_batch`` or here with its twin ``encode_batch`` (the
parity tests keep the two byte-identical).

A batch is items back to back, each big-endian (RocketMQ MessageDecoder.encodeMessages):

| off | field | bytes |
| --- | --- | --- |
| 0 | TOTALSIZE (whole item: 22 + body + properties) | 4 |
| 4 | MAGICCODE (clients send 0; ignored) | 4 |
| 8 | BODYCRC (clients send 0; ignored, the broker computes it) | 4 |
| 12 | FLAG (user flag) | 4 |
| 16 | BODY length + body | 4 + n |
| .. | PROPERTIES length (int16) + properties | 2 + n |

Item i of a batch sent to one queue becomes a record with QUEUEOFFSET =
``queue_offset_first + i`` and PHYSICALOFFSET = ``phys_offset_first`` + the
bytes of the records before it; RECONSUMETIMES and PREPARED TRANSACTION
OFFSET are 0. A record stores the item's properties as
``record_format.stored_properties`` makes them (any ``__CRC32#`` pair dropped; with
``record_crc`` the whole-record CRC property appended and sealed). An item whose sizes do
not add up, or whose stored properties would pass 32767 bytes, makes the whole batch
``MalformedBatch``; a batch whose records do not fit before ``dst_limit`` is
``DestinationTooSmall`` and nothing is written (the caller rolls to the next
file).
"""

from __future__ import annotations

import struct
from array import array
from typing import Iterable, NamedTuple

from rocketbox.cluster.format_errors import DestinationTooSmall, MalformedBatch
from rocketbox.cluster.field_tables import struct_of
from rocketbox.cluster.message import record_format
from rocketbox.cluster.message.properties import PROPERTY_SEPARATOR, PROPERTY_UNIQ_KEY, property_mark

# The item's fields before its body (the native helper's ITEM_OFF_* are generated from them).
ITEM_HEAD_FIELDS = (("TOTALSIZE", "i"), ("MAGIC", "i"), ("BODYCRC", "i"), ("FLAG", "i"), ("BODYLEN", "i"))
ITEM_HEAD = struct_of(ITEM_HEAD_FIELDS)
PROPERTIES_LENGTH = struct.Struct(">h")
ITEM_FIXED_SIZE = ITEM_HEAD.size + PROPERTIES_LENGTH.size  # 22
RECORD_SIZE_MAX = 2**31 - 1  # the record's TOTALSIZE is an int32


class BatchItem(NamedTuple):
    flag: int
    body: bytes
    properties: bytes


def item_size(body_len: int, properties_len: int) -> int:
    return ITEM_FIXED_SIZE + body_len + properties_len


def encode_items(items: Iterable[tuple[int, bytes, bytes]]) -> bytes:
    """A batch body from ``(flag, body, properties_bytes)`` items; magic and CRC are 0, as clients send."""
    out = bytearray()
    for flag, body, properties in items:
        if len(properties) > record_format.PROPERTIES_LENGTH_MAX:
            raise ValueError(f"properties are {len(properties)} bytes, more than {record_format.PROPERTIES_LENGTH_MAX}")
        out += ITEM_HEAD.pack(item_size(len(body), len(properties)), 0, 0, flag, len(body))
        out += body
        out += PROPERTIES_LENGTH.pack(len(properties))
        out += properties
    return bytes(out)


def encode_items_sharing_properties(flag: int, bodies: list, shared_properties: bytes,
                                    uniq_ids: list[bytes]) -> bytes:
    """A batch body whose items differ only in body and UNIQ_KEY (the common batch).

    Each item's properties are ``shared_properties`` + ``UNIQ_KEY\\x01<id>\\x02``; the
    bytes are exactly what ``encode_items`` makes for the same items, built with a
    few operations per item instead of a properties dict each.
    """
    if not bodies:
        return b""
    prefix = shared_properties + property_mark(PROPERTY_UNIQ_KEY).encode()
    id_len = len(uniq_ids[0])
    properties_len = len(prefix) + id_len + 1
    if properties_len > record_format.PROPERTIES_LENGTH_MAX:
        raise ValueError(f"properties are {properties_len} bytes, more than {record_format.PROPERTIES_LENGTH_MAX}")
    if any(len(i) != id_len for i in uniq_ids):
        raise ValueError("every UNIQ_KEY of a shared-properties batch must have the same length")
    between = PROPERTIES_LENGTH.pack(properties_len) + prefix
    pack = ITEM_HEAD.pack
    fixed = ITEM_FIXED_SIZE + properties_len
    end_of_pair = PROPERTY_SEPARATOR.encode()
    parts = []
    append = parts.append
    for body, uniq in zip(bodies, uniq_ids):
        append(pack(fixed + len(body), 0, 0, flag, len(body)))
        append(body)
        append(between)
        append(uniq)
        append(end_of_pair)
    return b"".join(parts)


def _item_at(batch, pos: int) -> tuple[BatchItem, int]:
    """The item at ``batch[pos:]`` and its size; MalformedBatch if its sizes do not add up."""
    left = len(batch) - pos
    if left < ITEM_FIXED_SIZE:
        raise MalformedBatch(f"{left} bytes at {pos}, fewer than an item's {ITEM_FIXED_SIZE}")
    total, _magic, _crc, flag, body_len = ITEM_HEAD.unpack_from(batch, pos)
    if total < ITEM_FIXED_SIZE or total > left:
        raise MalformedBatch(f"item at {pos} claims {total} bytes, {left} left")
    if body_len < 0 or body_len > total - ITEM_FIXED_SIZE:
        raise MalformedBatch(f"item at {pos}: body length {body_len} does not fit in {total}")
    p = pos + ITEM_HEAD.size + body_len
    (properties_len,) = PROPERTIES_LENGTH.unpack_from(batch, p)
    if properties_len < 0 or item_size(body_len, properties_len) != total:
        raise MalformedBatch(f"item at {pos}: body {body_len} + properties {properties_len} != {total}")
    body = bytes(batch[pos + ITEM_HEAD.size:p])
    properties = bytes(batch[p + PROPERTIES_LENGTH.size:pos + total])
    if b"\x00" in properties:
        # Never part of "name\x01value\x02" pairs; recovery reads a trailing NUL as a torn write.
        raise MalformedBatch(f"item at {pos}: properties contain a NUL byte")
    return BatchItem(flag, body, properties), total


def decode_items(batch) -> list[BatchItem]:
    """Every item of a batch body; MalformedBatch if any size does not add up."""
    items = []
    pos = 0
    while pos < len(batch):
        item, size = _item_at(batch, pos)
        items.append(item)
        pos += size
    return items


def measure_batch(batch, topic_len: int, *, record_crc: bool = False) -> tuple[int, int]:
    """(item count, bytes the records will take) for a topic of ``topic_len`` bytes."""
    if not 0 <= topic_len <= record_format.TOPIC_LENGTH_MAX:
        raise ValueError(f"topic is {topic_len} bytes, more than {record_format.TOPIC_LENGTH_MAX}")
    stored = [(len(item.body), len(record_format.stored_properties(item.properties, record_crc)))
              for item in decode_items(batch)]
    properties_max = record_format.PROPERTIES_LENGTH_MAX
    if any(properties_len > properties_max for _, properties_len in stored):
        raise MalformedBatch(f"an item's stored properties would be more than {properties_max} bytes")
    sizes = [record_format.record_size(body_len, topic_len, properties_len) for body_len, properties_len in stored]
    if any(size > RECORD_SIZE_MAX for size in sizes):
        raise MalformedBatch(f"a record would be more than {RECORD_SIZE_MAX} bytes")
    return len(sizes), sum(sizes)


def encode_batch(dst, dst_pos: int, batch, topic: bytes, queue_id: int, queue_offset_first: int,
                 phys_offset_first: int, sys_flag: int, born_timestamp_ms: int, born_host: bytes,
                 store_timestamp_ms: int, store_host: bytes, *,
                 dst_limit: int | None = None, record_crc: bool = False) -> tuple[int, int, array]:
    """Write the batch's items as records at ``dst[dst_pos:dst_limit]``, all or nothing.

    Returns ``(bytes_written, count, record_ends)``, ``record_ends[i]`` being the
    position in ``dst`` just after record i (an ``array('q')``).
    """
    for name, host in (("born_host", born_host), ("store_host", store_host)):
        if len(host) != 8:
            raise ValueError(f"{name} must be 8 bytes (IPv4 + port), got {len(host)}")
    limit = len(dst) if dst_limit is None else dst_limit
    if not 0 <= dst_pos <= limit <= len(dst):
        raise ValueError(f"destination range [{dst_pos}, {limit}) is not inside {len(dst)} bytes")
    _, total = measure_batch(batch, len(topic), record_crc=record_crc)
    if total > limit - dst_pos:
        raise DestinationTooSmall(f"{total} bytes of records, {limit - dst_pos} left")
    record_ends = array("q")
    pos = dst_pos
    for i, item in enumerate(decode_items(batch)):
        pos += record_format.encode_into(
            dst, pos, queue_id=queue_id, flag=item.flag, queue_offset=queue_offset_first + i,
            phys_offset=phys_offset_first + (pos - dst_pos), sys_flag=sys_flag,
            born_timestamp_ms=born_timestamp_ms, born_host=born_host,
            store_timestamp_ms=store_timestamp_ms, store_host=store_host, reconsume_times=0,
            prepared_transaction_offset=0, body=item.body, topic=topic,
            properties=record_format.stored_properties(item.properties, record_crc), record_crc=record_crc)
        record_ends.append(pos)
    return total, len(record_ends), record_ends
