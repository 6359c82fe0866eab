"""The broker's ConsumeQueue writer: the one route from a write to the readers of its queue.

After the broker appends records (its own sends, schedule and pop records, or a slave's
replicated bytes), ``catch_up`` writes their ConsumeQueue entries in this process, with the
dispatch code recovery uses (``shm/reput.Dispatcher``, ConsumeQueue only: a few C calls a batch of
records, whatever their number), and publishes ``control.queued_pos``. The broker calls it once a
loop turn after its writes, and every read of a queue calls it first, so a read never misses a
record appended before it. Entries are visible to reads up to ``MessageStore.visible_end``: the end
of the log under async flush, ``flushed_pos`` under sync flush (a consumer never reads a record a
power cut could still take). The reput worker builds the IndexFile behind ``queued_pos``.

Why here and not in the reput worker (measured, docs/ARCHITECTURE.md "The path of one message"):
a consumer waiting for a message then waits for no other process under async flush, and for the
flush worker alone under sync flush (it was broker -> flush -> reput -> broker, three wake-ups);
the earlier shortcut that served parked pulls from the broker's own list of recent writes, a
second route with its own notion of visible, is gone.
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster.config import StoreConfig, parse_levels
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.reput import Dispatcher

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# After a dispatch stopped on a problem (a full disk for a new ConsumeQueue file, an unreadable
# record), how soon reads try again: every read would otherwise scan the same records again.
RETRY_AFTER_PROBLEM_S = 0.1


class QueueWriter:
    def __init__(self, cfg: StoreConfig, control: ControlBlock, commitlog: CommitLog, cqs: ConsumeQueueSet):
        self.control = control
        self.commitlog = commitlog
        self.dispatcher = Dispatcher(cqs, None, delay_levels_ms=parse_levels(cfg.message_delay_levels),
                                     build_index=False)
        self.queued_pos = 0
        self._touched: set[tuple[str, int]] = set()
        self._retry_at = 0.0

    def start_at(self, pos: int) -> None:
        """Recovery dispatched everything below ``pos``."""
        self.queued_pos = pos
        self.control.queued_pos = pos

    def catch_up(self) -> None:
        """Write the ConsumeQueue entries of every record appended so far."""
        end = self.commitlog.write_pos
        start = self.queued_pos
        if start >= end or (self._retry_at and time.monotonic() < self._retry_at):
            return
        report = self.dispatcher.dispatch_range(start, end, self.commitlog)
        if report.dispatched_pos != start:
            self.queued_pos = report.dispatched_pos
            self.control.queued_pos = report.dispatched_pos
        if report.touched:
            self._touched |= report.touched
        if report.problem is not None:
            self._retry_at = time.monotonic() + RETRY_AFTER_PROBLEM_S
            _limited.error("queue-writer", "ConsumeQueue entries stopped at %d: %s", report.dispatched_pos,
                           report.problem)
        else:
            self._retry_at = 0.0

    def take_touched(self) -> set[tuple[str, int]]:
        """The queues that got entries since the last call (for the pulls parked on them)."""
        touched, self._touched = self._touched, set()
        return touched

    def forget_topic(self, topic: str) -> None:
        self._touched = {key for key in self._touched if key[0] != topic}
