"""A slow disk for one process: a cgroup v1 blkio group whose writes to the store's device are
throttled (``blkio.throttle.write_bps_device``). The overload runs put a broker's flush worker in
it, so a sync-flush broker stores only what its msyncs get onto the disk, the way a broker on a
slow disk does: the broker is the bottleneck without taking the CPU the load generators need on a
two-core machine. Needs root and the blkio controller; ``unavailable()`` says why not.
"""

from __future__ import annotations

import contextlib
import os

BLKIO_ROOT = "/sys/fs/cgroup/blkio"


def unavailable() -> str | None:
    """Why a disk cannot be throttled here, or None."""
    if not os.path.isdir(BLKIO_ROOT):
        return f"no cgroup v1 blkio controller at {BLKIO_ROOT}"
    if not os.access(BLKIO_ROOT, os.W_OK):
        return f"{BLKIO_ROOT} is not writable (needs root)"
    return None


@contextlib.contextmanager
def throttled(pid: int, path: str, write_bytes_per_s: int):
    """Throttle ``pid``'s writes to the device holding ``path`` while the block runs."""
    dev = os.stat(path).st_dev
    group = os.path.join(BLKIO_ROOT, f"rocketbox-slow-disk-{os.getpid()}-{pid}")
    os.makedirs(group, exist_ok=True)
    try:
        with open(os.path.join(group, "blkio.throttle.write_bps_device"), "w") as f:
            f.write(f"{os.major(dev)}:{os.minor(dev)} {write_bytes_per_s}")
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        yield
    finally:
        with contextlib.suppress(OSError):
            with open(os.path.join(BLKIO_ROOT, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        with contextlib.suppress(OSError):
            os.rmdir(group)
