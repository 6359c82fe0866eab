"""The disk's fault-injecting twin, for one process: put behind the store with
``durable.using(disk)`` (inside ``disk.installed()``) and the store runs on a disk that can be
full, sync slowly, and lose power.

Built on the power-loss emulation (``cluster/shm/power_cut.py``): while installed, every completed
sync is mirrored into a durable image of the store's directory, and :meth:`FaultyDisk.power_cut`
rewrites the directory as the disk would hold it after the power went out: names never synced
vanish, and each page written since its last sync holds its old bytes, its new bytes or garbage
(a torn write), as the seeded random generator decides. Everything is drawn from the caller's
``random.Random``, so one seed gives one history. Test support only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random

from rocketbox.cluster.clock import ManualClock
from rocketbox.cluster.shm import durable, power_cut


class FaultyDisk(durable.Disk):
    """The real disk, plus: ``full`` (no free space: the CommitLog refuses appends below its floor,
    whole-file writes fail with ENOSPC), ``sync_delay_s`` (each sync moves ``clock`` that far: a
    slow fsync as the broker's timers see it), and :meth:`power_cut`."""

    def __init__(self, root: str, image: str, rng: random.Random, clock: ManualClock):
        self.root = os.path.abspath(root)
        self.image = image
        self.rng = rng
        self.clock = clock
        self.full = False
        self.sync_delay_s = 0.0
        self.syncs = 0

    @contextlib.contextmanager
    def installed(self):
        """Behind the store meanwhile, with a durable image of ``root`` (all of it durable now)."""
        power_cut.start_image(self.root, self.image)
        with power_cut.imaging(self.image), durable.using(self):
            yield self

    def _synced(self) -> None:
        self.syncs += 1
        if self.sync_delay_s:
            self.clock.advance(self.sync_delay_s)

    def fsync_fd(self, fd: int, path: str) -> None:
        super().fsync_fd(fd, path)
        self._synced()

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        self._synced()

    def synced_range(self, path: str, start: int, end: int) -> None:
        super().synced_range(path, start, end)
        self._synced()

    def write(self, fd: int, data: bytes) -> None:
        if self.full and data:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().write(fd, data)

    def free_bytes(self, path: str) -> int:
        return 0 if self.full else super().free_bytes(path)

    def power_cut(self, weights=(0.4, 0.4, 0.2)) -> power_cut.CutReport:
        """The power goes out (every user of the store must be stopped first): ``root`` as the disk
        holds it now. ``weights``: an unsynced page's odds of keeping its old bytes, its new ones,
        or turning to garbage."""
        return power_cut.cut(self.root, self.image, self.rng, weights)
