"""The ConsumeQueue entry: RocketMQ's 20-byte layout, the only place that knows it.

Pure: no I/O. One entry per message of a (topic, queue id), entry n at byte n * 20:

| off | field | bytes |
| --- | --- | --- |
| 0 | CommitLog phys offset (int64) | 8 |
| 8 | record size (int32); 0 = empty slot of a preallocated file | 4 |
| 12 | tag hash code (int64): Java String.hashCode of TAGS widened, 0 with no tag | 8 |

Readers treat ``size == 0`` as "no entry yet", which is why writers store the size
last (see ``ConsumeQueue.put``).
"""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import mul

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size  # 20
PHYS = struct.Struct(">q")
SIZE = struct.Struct(">i")
TAG = struct.Struct(">q")
OFF_PHYS = 0
OFF_SIZE = 8
OFF_TAG = 12

_U32 = 0xFFFFFFFF
# h = sum(c[i] * 31^(n-1-i)) mod 2^32: with the powers precomputed, the sum runs in C
# (map + operator.mul), several times faster than a Python loop per character.
_POWERS_LEN = 256
_POWERS_DESC = [pow(31, _POWERS_LEN - 1 - i, 1 << 32) for i in range(_POWERS_LEN)]


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, as a signed int32."""
    if s.isascii():
        units = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    n = len(units)
    if n <= _POWERS_LEN:
        h = sum(map(mul, units, _POWERS_DESC[_POWERS_LEN - n:])) & _U32
    else:
        h = 0
        for unit in units:
            h = (31 * h + unit) & _U32
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def tag_hash_code(tags: str | None) -> int:
    """The ConsumeQueue tag hash of a message's TAGS property; 0 when it has none.

    Cached: a topic carries few distinct tags, and this runs once per dispatched message.
    """
    if not tags:
        return 0
    return java_string_hash(tags)


def encode_entry(phys_offset: int, size: int, tag_hash: int) -> bytes:
    return ENTRY.pack(phys_offset, size, tag_hash)


def decode_entry(buf, pos: int = 0) -> tuple[int, int, int]:
    """(phys_offset, size, tag_hash) at ``buf[pos:]``; size 0 means empty."""
    return ENTRY.unpack_from(buf, pos)
