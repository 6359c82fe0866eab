"""The three file sets a worker service maps: CommitLog, ConsumeQueues, IndexFiles.

Each worker process opens its own mappings of the same files; tests and the one-process
harness pass in shared instances instead.
"""

from __future__ import annotations

from rocketbox.cluster.config import StoreConfig
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.shm.indexfile import IndexService


def open_store_files(cfg: StoreConfig, commitlog: CommitLog | None = None, cqs: ConsumeQueueSet | None = None,
                     index: IndexService | None = None) -> tuple[CommitLog, ConsumeQueueSet, IndexService]:
    """The given instances, or fresh ones over ``cfg.store_dir``."""
    return commitlog or CommitLog(cfg), cqs or ConsumeQueueSet(cfg), index or IndexService(cfg)


class FloorWatch:
    """Follows the CommitLog's floor (``control.commitlog_min_pos``, moved by retention) for one
    process: when it moves, the process unmaps its segments and ConsumeQueue files below it, whose
    disk space comes back only once every process has unmapped them."""

    def __init__(self, control, commitlog: CommitLog, cqs: ConsumeQueueSet):
        self.control = control
        self.commitlog = commitlog
        self.cqs = cqs
        self.seen = 0

    def floor(self) -> int:
        """The floor now (one shared-memory load)."""
        floor = self.control.commitlog_min_pos
        if floor != self.seen:
            self.seen = floor
            self.commitlog.unmap_before(floor)
            self.cqs.release_below(floor)
        return floor
