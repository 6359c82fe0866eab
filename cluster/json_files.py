"""Atomic JSON files (topic configs, consumer offsets, ... under ``<store_dir>/config/``).

A write goes to a temp file, is fsynced, renamed over the old file, and the
directory is fsynced: a crash leaves either the old or the new content, never half.
"""

from __future__ import annotations

import json

from rocketbox.cluster.shm.durable import atomic_write


def write_json(path: str, value, *, durable: bool = True) -> None:
    """Replace ``path`` atomically: readers see the old document or the new one, never half.

    ``durable`` (configs, offsets) also fsyncs the file and its directory; run state that is
    rewritten every second and stale after a machine crash anyway passes False."""
    atomic_write(path, json.dumps(value, sort_keys=True, indent=1).encode(), durable=durable)


def read_json(path: str, default=None):
    """The stored value; ``default`` when the file is missing or not valid JSON."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (FileNotFoundError, ValueError):
        return default


