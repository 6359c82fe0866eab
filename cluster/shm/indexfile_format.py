"""The IndexFile layout (RocketMQ's), the only place that knows it.

Pure: no I/O. A file is a 40-byte header, ``slot_count`` 4-byte hash slots, then
``entry_count_max`` 20-byte entries, all big-endian:

Header:

| off | field | bytes |
| --- | --- | --- |
| 0 | beginTimestamp ms | 8 |
| 8 | endTimestamp ms | 8 |
| 16 | beginPhyOffset | 8 |
| 24 | endPhyOffset | 8 |
| 32 | hashSlotCount (slots in use) | 4 |
| 36 | indexCount: the NEXT entry number (RocketMQ starts it at 1; entry 0 is never used) | 4 |

Slot ``s`` at ``40 + s*4``: the number of the newest entry whose key hashes there
(0 = empty). Entry ``n`` (1-based) at ``40 + slot_count*4 + n*20``:

| off | field | bytes |
| --- | --- | --- |
| 0 | keyHash: abs(Java String.hashCode(key)), abs(-2^31) = 0 | 4 |
| 4 | CommitLog phys offset | 8 |
| 12 | timeDiff: (storeTimestamp - beginTimestamp) in seconds | 4 |
| 16 | previous entry number in the same slot (0 = end of chain) | 4 |

A fresh (all-zero) header reads as indexCount 0; ``entries_used`` treats 0 and 1 alike.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocketbox.cluster.message.tags import java_string_hash
from rocketbox.cluster.field_tables import struct_of

# The native helper's IX_* constants are generated from these tables.
HEADER_FIELDS = (("BEGIN_TS", "q"), ("END_TS", "q"), ("BEGIN_PHYS", "q"), ("END_PHYS", "q"),
                 ("SLOTS_USED", "i"), ("INDEX_COUNT", "i"))
ENTRY_FIELDS = (("HASH", "i"), ("PHYS", "q"), ("TIME_DIFF", "i"), ("PREV", "i"))
# A lookup follows one slot's chain at most this many entries (a damaged file may hold a cycle).
LOOKUP_CHAIN_STEPS_MAX = 1_000_000
HEADER = struct_of(HEADER_FIELDS)
HEADER_SIZE = HEADER.size  # 40
SLOT = struct.Struct(">i")
SLOT_SIZE = SLOT.size  # 4
ENTRY = struct_of(ENTRY_FIELDS)
ENTRY_SIZE = ENTRY.size  # 20
INT32_MAX = 0x7FFFFFFF


class IndexHeader(NamedTuple):
    begin_timestamp_ms: int
    end_timestamp_ms: int
    begin_phys_offset: int
    end_phys_offset: int
    hash_slot_count: int
    index_count: int

    @property
    def entries_used(self) -> int:
        return max(self.index_count - 1, 0)


class IndexEntry(NamedTuple):
    key_hash: int
    phys_offset: int
    time_diff_s: int
    prev_index: int


def file_size_bytes(slot_count: int, entry_count_max: int) -> int:
    return HEADER_SIZE + slot_count * SLOT_SIZE + entry_count_max * ENTRY_SIZE


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * SLOT_SIZE


def entry_position(slot_count: int, entry_number: int) -> int:
    return HEADER_SIZE + slot_count * SLOT_SIZE + entry_number * ENTRY_SIZE


def key_hash(key: str) -> int:
    """The non-negative hash stored in entries: abs(hashCode), with abs(-2^31) counted as 0."""
    h = java_string_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def time_diff_seconds(store_timestamp_ms: int, begin_timestamp_ms: int) -> int:
    """RocketMQ clamps: no begin yet or a clock step back gives 0, overflow gives INT32_MAX."""
    if begin_timestamp_ms <= 0:
        return 0
    diff = (store_timestamp_ms - begin_timestamp_ms) // 1000
    return min(max(diff, 0), INT32_MAX)


def encode_header(h: IndexHeader) -> bytes:
    return HEADER.pack(*h)


def decode_header(buf, pos: int = 0) -> IndexHeader:
    return IndexHeader(*HEADER.unpack_from(buf, pos))


def encode_entry(e: IndexEntry) -> bytes:
    return ENTRY.pack(*e)


def decode_entry(buf, pos: int) -> IndexEntry:
    return IndexEntry(*ENTRY.unpack_from(buf, pos))
