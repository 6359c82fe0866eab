"""Ports handed out by ``topology.free_ports`` stay reserved for a while across processes.

A port found free is not bound until the cluster it was picked for has started its children
(~0.2-1 s later); a test in another pytest worker picking ports meanwhile found it free too, and one
of the two clusters failed to start ("Address already in use", seen once in a CI run). A picker
first claims the port as a file in a directory shared by every process of this user
(``O_CREAT | O_EXCL``); a claim younger than ``HOLD_S`` is another picker's, an older one is
stale and taken over. Bounded: one small file a port, at most the range ``free_ports`` picks from.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time

HOLD_S = 60.0


@functools.cache
def _directory() -> str:
    path = os.path.join(tempfile.gettempdir(), f"rocketbox-port-claims-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def claim(port: int, now: float | None = None) -> bool:
    """True when this caller may use ``port`` (unclaimed, or its claim is stale); False when another
    picker claimed it within ``HOLD_S``."""
    path = os.path.join(_directory(), str(port))
    now = time.time() if now is None else now
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.utime(path, (now, now))
        return True
    except FileExistsError:
        pass
    try:
        if now - os.stat(path).st_mtime < HOLD_S:
            return False
        os.utime(path, (now, now))
    except FileNotFoundError:   # removed meanwhile (by hand): free again
        return False
    return True
