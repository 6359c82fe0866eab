"""Atomic JSON files (topic configs, consumer offsets, ... under ``<store_dir>/config/``).

A write goes to a temp file, is fsynced, renamed over the old file, and the
directory is fsynced: a crash leaves either the old or the new content, never half.
"""

from __future__ import annotations

import json
import os

from rocketbox.cluster.shm.mapped_file import fsync_dir


def write_json(path: str, value, *, durable: bool = True) -> None:
    """Replace ``path`` atomically: readers see the old document or the new one, never half.

    ``durable`` (configs, offsets) also fsyncs the file and its directory; run state that is
    rewritten every second and stale after a machine crash anyway passes False."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    data = json.dumps(value, sort_keys=True, indent=1).encode()
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(directory)


def read_json(path: str, default=None):
    """The stored value; ``default`` when the file is missing or not valid JSON."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (FileNotFoundError, ValueError):
        return default


