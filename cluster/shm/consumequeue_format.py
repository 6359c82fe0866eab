"""The ConsumeQueue entry: RocketMQ's 20-byte layout, the only place that knows it.

Pure: no I/O. One entry per message of a (topic, queue id), entry n at byte n * 20:

| off | field | bytes |
| --- | --- | --- |
| 0 | CommitLog phys offset (int64) | 8 |
| 8 | record size (int32); 0 = empty slot of a preallocated file | 4 |
| 12 | tag hash code (int64): ``message/tags.py``'s tag_hash_code widened, 0 with no tag | 8 |

Readers treat ``size == 0`` as "no entry yet", which is why writers store the size
last (see ``ConsumeQueue.put``).
"""

from __future__ import annotations

import struct

from rocketbox.cluster.field_tables import offsets_of, struct_of

# The native helper's CQ_* constants are generated from this table.
ENTRY_FIELDS = (("PHYS", "q"), ("SIZE", "i"), ("TAG", "q"))
ENTRY = struct_of(ENTRY_FIELDS)
ENTRY_SIZE = ENTRY.size  # 20
PHYS = struct.Struct(">q")
SIZE = struct.Struct(">i")
TAG = struct.Struct(">q")
_OFFSETS = offsets_of(ENTRY_FIELDS)
OFF_PHYS = _OFFSETS["PHYS"]
OFF_SIZE = _OFFSETS["SIZE"]
OFF_TAG = _OFFSETS["TAG"]


def encode_entry(phys_offset: int, size: int, tag_hash: int) -> bytes:
    return ENTRY.pack(phys_offset, size, tag_hash)


def decode_entry(buf, pos: int = 0) -> tuple[int, int, int]:
    """(phys_offset, size, tag_hash) at ``buf[pos:]``; size 0 means empty."""
    return ENTRY.unpack_from(buf, pos)
