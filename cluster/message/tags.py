"""The tag hash: Java's String.hashCode of a message's TAGS, as a ConsumeQueue entry stores it and
tag filters and hash queue selectors compare it. Pure: no I/O."""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import mul

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
    """The tag hash of a message's TAGS property; 0 when it has none.

    Cached: a topic carries few distinct tags, and this runs once per dispatched message.
    """
    if not tags:
        return 0
    return java_string_hash(tags)
