"""The bytes of ``<store_dir>/checkpoint``: how far the CommitLog and the logic files were durable.

Layout, big-endian, 48 bytes:

| off | field | bytes |
| --- | --- | --- |
| 0 | magic "RBCKPT" + version | 8 |
| 8 | commitlog_flushed_pos | 8 |
| 16 | dispatched_flushed_pos (ConsumeQueue/IndexFile flushed up to this dispatch position) | 8 |
| 24 | commitlog_flushed_ms (wall clock) | 8 |
| 32 | logics_flushed_ms | 8 |
| 40 | crc32 of bytes 0..40 | 4 |
| 44 | zero padding | 4 |

Pure: no I/O (``checkpoint.py`` reads and writes the file).
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

MAGIC = 0x5242434B_50540001
LAYOUT = struct.Struct(">Qqqqq")
CRC = struct.Struct(">I4x")
SIZE_BYTES = LAYOUT.size + CRC.size


class Checkpoint(NamedTuple):
    commitlog_flushed_pos: int
    dispatched_flushed_pos: int
    commitlog_flushed_ms: int
    logics_flushed_ms: int


def encode(cp: Checkpoint) -> bytes:
    body = LAYOUT.pack(MAGIC, *cp)
    return body + CRC.pack(zlib.crc32(body))


def decode(raw: bytes) -> Checkpoint | None:
    """The checkpoint, or None for bytes of the wrong size, CRC or magic (a damaged file)."""
    if len(raw) != SIZE_BYTES:
        return None
    body = raw[:LAYOUT.size]
    if CRC.unpack_from(raw, LAYOUT.size)[0] != zlib.crc32(body):
        return None
    magic, *fields = LAYOUT.unpack(body)
    if magic != MAGIC:
        return None
    return Checkpoint(*fields)
