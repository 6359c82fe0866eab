"""``<store_dir>/checkpoint``: how far the CommitLog and the logic files were durable.

Written by the flush worker after each logics flush (and by recovery, which runs
before any worker), always atomically (temp file, fsync, rename, fsync dir).
Recovery starts verifying the CommitLog at ``commitlog_flushed_pos`` and re-dispatches
from ``dispatched_flushed_pos``. Both are record boundaries (cursors only ever stop
between records).

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
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import NamedTuple

from cluster.shm.mapped_file import fsync_dir
from cluster.shm.paths import checkpoint_path

MAGIC = 0x5242434B_50540001
LAYOUT = struct.Struct(">Qqqqq")
CRC = struct.Struct(">I4x")


class Checkpoint(NamedTuple):
    commitlog_flushed_pos: int
    dispatched_flushed_pos: int
    commitlog_flushed_ms: int
    logics_flushed_ms: int


def encode(cp: Checkpoint) -> bytes:
    body = LAYOUT.pack(MAGIC, *cp)
    return body + CRC.pack(zlib.crc32(body))


def decode(raw: bytes) -> Checkpoint | None:
    if len(raw) != LAYOUT.size + CRC.size:
        return None
    body = raw[:LAYOUT.size]
    if CRC.unpack_from(raw, LAYOUT.size)[0] != zlib.crc32(body):
        return None
    magic, *fields = LAYOUT.unpack(body)
    if magic != MAGIC:
        return None
    return Checkpoint(*fields)


def write(store_dir: str, cp: Checkpoint) -> None:
    path = checkpoint_path(store_dir)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(encode(cp))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(store_dir)


def read(store_dir: str) -> Checkpoint | None:
    """The checkpoint, or None when missing or damaged (recovery then starts from scratch)."""
    try:
        with open(checkpoint_path(store_dir), "rb") as f:
            return decode(f.read(64))
    except FileNotFoundError:
        return None
