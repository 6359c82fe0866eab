"""One thread's loop: readable sockets, timers, once-a-turn hooks and a stop flag set from a signal.

It also keeps, for the doors that ask (``watch_backlog``), the latest moment each was known to have
nothing unread: a request a door reads later arrived after that moment, so how long it may have
waited in front of the loop is known without stamping any request (``fast_failure.py``). To know
it, a turn first polls without waiting; only when nothing is ready does it wait, and then every
watched door was empty when the wait began.

With ``busy_poll_s`` the loop keeps polling without waiting for that long after its last work
before it sleeps: a request that follows soon (the next sync send of a client) finds the thread
running and its caches warm. Measured on this 2-core VM (perf/RESULTS.md), serving one
send took ~3x the CPU when the loop had slept before it (the header decode: 18.7 us against
6.2 us run hot), and a wake-up of a sleeping thread costs tens of microseconds besides.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import time
from typing import Callable

import zmq

from rocketbox.cluster.loop_stalls import RunQueueDelay, empty_as_of

log = logging.getLogger(__name__)


class EventLoop:
    def __init__(self, busy_poll_s: float = 0.0):
        self.busy_poll_s = busy_poll_s
        self._worked_at = 0.0   # when a turn that found something to do ended
        self._poller = zmq.Poller()
        self._readers: dict = {}
        self._timers: list = []
        self._timer_seq = itertools.count()
        self.stopping = False
        self._after_batch: list[Callable[[], None]] = []
        self._backlogs: list = []
        self._again: list[Callable[[], None]] = []
        self._run_queue_delay: RunQueueDelay | None = None

    def watch_stop_fd(self, fd: int) -> None:
        """Poll ``fd`` (a signal wake-up pipe): a stop signal then ends the wait at once."""
        def drain():
            try:
                os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                pass
        self.add_reader(fd, drain)

    def add_reader(self, sock, callback: Callable[[], None]) -> None:
        self._poller.register(sock, zmq.POLLIN)
        self._readers[sock] = callback

    def watch_backlog(self, backlog) -> None:
        """Keep ``backlog.drained_at`` (the last time its ``source``, a reader of this loop, had
        nothing unread) current across the turns it is not readable in, and give it this thread's
        run-queue delay (sampled on this loop), which its waits are not charged with."""
        if self._run_queue_delay is None:
            self._run_queue_delay = RunQueueDelay()
            if self._run_queue_delay.available:
                self.call_every(RunQueueDelay.SAMPLE_INTERVAL_S, self._run_queue_delay.sample)
        if self._run_queue_delay.available:
            backlog.run_queue_delay = self._run_queue_delay
        self._backlogs.append(backlog)

    def again(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once more next turn, without waiting (a reader with work left over)."""
        self._again.append(callback)

    def call_at(self, when_s: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (when_s, next(self._timer_seq), callback))

    def call_every(self, interval_s: float, callback: Callable[[], None]) -> None:
        def tick():
            try:
                callback()
            finally:
                self.call_at(time.monotonic() + interval_s, tick)
        self.call_at(time.monotonic() + interval_s, tick)

    def after_each_batch(self, callback: Callable[[], None]) -> None:
        """Run once per loop turn after every ready socket was served (batching hook)."""
        self._after_batch.append(callback)

    def run(self) -> None:
        while not self.stopping:
            now = time.monotonic()
            timeout_ms = 1000
            if self._timers:
                timeout_ms = max(0, min(timeout_ms, int((self._timers[0][0] - now) * 1000) + 1))
            again, self._again = self._again, []
            ready = self._poll(0 if again else timeout_ms)
            for sock, _ in ready:
                self._guarded(self._readers[sock])
            for callback in again:
                self._guarded(callback)
            for hook in self._after_batch:
                self._guarded(hook)
            now = time.monotonic()
            if ready or again:
                self._worked_at = now
            while self._timers and self._timers[0][0] <= now:
                _, _, callback = heapq.heappop(self._timers)
                self._guarded(callback)

    def _poll(self, timeout_ms: int) -> list:
        if timeout_ms > 0 and self.busy_poll_s:
            now = time.monotonic()
            end = min(self._worked_at + self.busy_poll_s, now + timeout_ms / 1000)
            while now < end:
                events = self._poll_once(0)
                if events:
                    return events
                os.sched_yield()   # a runnable process on this core (a worker, a client) goes first
                now = time.monotonic()
        return self._poll_once(timeout_ms)

    def _poll_once(self, timeout_ms: int) -> list:
        backlogs = self._backlogs
        if not backlogs:
            return self._poller.poll(timeout_ms)
        # The clock before the poll: a pause (SIGSTOP, a long GC) between the two must not make
        # requests that arrived during it look fresh.
        now = time.monotonic()
        events = self._poller.poll(0)
        if not events:
            now, found = empty_as_of(now, lambda: self._poller.poll(0))
            events = found or events
        if not events:
            # Nothing unread anywhere at this moment: whatever wakes the wait arrived after it.
            for backlog in backlogs:
                backlog.drained_at = now
            return self._poller.poll(timeout_ms) if timeout_ms > 0 else events
        if len(events) < len(self._readers):
            ready = {sock for sock, _ in events}
            for backlog in backlogs:
                if backlog.source not in ready:
                    backlog.drained_at = now
        return events

    @staticmethod
    def _guarded(callback) -> None:
        """A failing timer, hook or reader is logged; the process keeps serving (a full disk
        while persisting offsets must not become a crash loop)."""
        try:
            callback()
        except Exception:
            log.exception("event loop callback %s failed", getattr(callback, "__qualname__", callback))
