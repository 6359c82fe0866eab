"""``<store_dir>/checkpoint``: how far the CommitLog and the logic files were durable.

Written by the flush worker after each logics flush (and by recovery, which runs
before any worker), always atomically (temp file, fsync, rename, fsync dir).
Recovery starts verifying the CommitLog at ``commitlog_flushed_pos`` and re-dispatches
from ``dispatched_flushed_pos``. Both are record boundaries (cursors only ever stop
between records). The bytes: ``checkpoint_format.py``.
"""

from __future__ import annotations

from rocketbox.cluster.shm.checkpoint_format import SIZE_BYTES, Checkpoint, decode, encode
from rocketbox.cluster.shm.durable import atomic_write
from rocketbox.cluster.shm.paths import checkpoint_path

__all__ = ["Checkpoint", "read", "write"]


def write(store_dir: str, cp: Checkpoint) -> None:
    atomic_write(checkpoint_path(store_dir), encode(cp))


def read(store_dir: str) -> Checkpoint | None:
    """The checkpoint, or None when missing or damaged (recovery then starts from scratch)."""
    try:
        with open(checkpoint_path(store_dir), "rb") as f:
            return decode(f.read(SIZE_BYTES + 1))   # one byte more: a longer file is damaged too
    except FileNotFoundError:
        return None
