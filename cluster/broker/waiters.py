"""Requests the broker parks: sends waiting for the flush (group commit) and long-polling pulls.

Group commit (SPEC §4 durability): every sync-flush send is parked with the CommitLog
offset its bytes end at; when the flush worker publishes ``flushed_pos``, every
waiter whose end <= flushed_pos is answered at once. A waiter past its deadline
answers FLUSH_DISK_TIMEOUT. Parking costs a deque append; releasing is an offset
comparison per waiter, done once per flush, never a message per send.
"""

from __future__ import annotations

import collections
import time
from typing import Callable


# A send's expected wait for the disk is judged by the flushes of the last this many seconds.
FLUSH_RATE_WINDOW_S = 2.0
# ... and only behind a backlog this large: two flushes a second apart of a few hundred bytes (a
# quiet broker: a transaction's end after its half) measure the idle time between writes, not the
# disk, and made 400 unflushed bytes look 1.5 s away, refusing a send SYSTEM_BUSY on an idle disk.
FLUSH_ESTIMATE_BACKLOG_MIN_BYTES = 1 << 20


class FlushWaiters:
    def __init__(self):
        # (end_phys_offset, deadline_s, on_flushed, on_timeout, parked_s) in CommitLog order, so the
        # head always has the smallest end offset and the earliest deadline (one time-out for all).
        self._queue: collections.deque = collections.deque()
        self.parked_since_wake = 0
        # (time, flushed_pos) of the flushes of the last FLUSH_RATE_WINDOW_S, none further apart
        # (a quiet spell starts it afresh): how fast the disk takes bytes while it is busy.
        self._flushes: collections.deque = collections.deque()

    def park(self, end_phys_offset: int, deadline_s: float, on_flushed: Callable[[], None],
             on_timeout: Callable[[], None], parked_s: float | None = None) -> None:
        parked_s = time.monotonic() if parked_s is None else parked_s
        self._queue.append((end_phys_offset, deadline_s, on_flushed, on_timeout, parked_s))
        self.parked_since_wake += 1

    def __len__(self) -> int:
        return len(self._queue)

    def oldest_wait_s(self, now_s: float) -> float:
        """How long the longest-waiting one has waited (0 with none)."""
        return now_s - self._queue[0][4] if self._queue else 0.0

    def flush_wait_s(self, write_pos: int) -> float:
        """How long bytes written now would wait for the disk: the bytes not flushed yet over the rate
        recent flushes took bytes at (0 until two flushes close together were seen)."""
        flushes = self._flushes
        if len(flushes) < 2 or write_pos - flushes[-1][1] < FLUSH_ESTIMATE_BACKLOG_MIN_BYTES:
            return 0.0
        (first_s, first_pos), (last_s, last_pos) = flushes[0], flushes[-1]
        return max(0, write_pos - last_pos) * (last_s - first_s) / (last_pos - first_pos)

    def _flushed(self, flushed_pos: int, now_s: float) -> None:
        flushes = self._flushes
        if flushes and flushed_pos <= flushes[-1][1]:
            return
        if flushes and now_s - flushes[-1][0] > FLUSH_RATE_WINDOW_S:
            flushes.clear()   # the disk was idle (or one flush took that long: the oldest wait says so)
        flushes.append((now_s, flushed_pos))
        while now_s - flushes[0][0] > FLUSH_RATE_WINDOW_S:
            flushes.popleft()

    def release(self, flushed_pos: int, now_s: float | None = None) -> int:
        """Answer every waiter flushed by now, and every one past its deadline."""
        now_s = time.monotonic() if now_s is None else now_s
        queue = self._queue
        released = 0
        while queue:
            end, deadline, on_flushed, on_timeout, _ = queue[0]
            if end <= flushed_pos:
                queue.popleft()
                on_flushed()
                released += 1
            elif deadline <= now_s:
                queue.popleft()
                on_timeout()
                released += 1
            else:
                break
        self._flushed(flushed_pos, now_s)   # after the release: what still waits waited through it
        return released

    def fail_all(self) -> None:
        while self._queue:
            self._queue.popleft()[3]()


class PullWaiters:
    """Long-polling pulls, keyed by queue, retried when a dispatch touches their queue."""

    def __init__(self):
        self._by_queue: dict[tuple[str, int], list] = {}
        self._count = 0

    def park(self, topic: str, queue_id: int, deadline_s: float, retry: Callable[[bool], bool]) -> None:
        """``retry(final)`` re-serves the pull; returns True once it has answered."""
        self._by_queue.setdefault((topic, queue_id), []).append((deadline_s, retry))
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def wake(self, queues) -> int:
        """Retry the pulls parked on ``queues``; returns how many answered."""
        answered = 0
        for key in queues:
            parked = self._by_queue.pop(key, None)
            if parked:
                self._count -= len(parked)
                keep = [(d, retry) for d, retry in parked if not retry(False)]
                answered += len(parked) - len(keep)
                if keep:
                    self._by_queue.setdefault(key, []).extend(keep)
                    self._count += len(keep)
        return answered

    def expire(self, now_s: float | None = None) -> None:
        now_s = time.monotonic() if now_s is None else now_s
        for key in list(self._by_queue):
            parked = self._by_queue[key]
            keep = []
            for deadline, retry in parked:
                if deadline <= now_s:
                    retry(True)
                    self._count -= 1
                else:
                    keep.append((deadline, retry))
            if keep:
                self._by_queue[key] = keep
            else:
                del self._by_queue[key]


# Turns with writes remembered at most while the flush is behind (older ones merge): bounds the
# memory of a stalled disk, at the cost of waking a few pulls early (they look and park again).
UNFLUSHED_TURNS_MAX = 64


class UnflushedQueues:
    """Under sync flush a queue's new entries are readable once the flush passed their records:
    the queues each loop turn wrote, kept with the log's end then, until ``flushed_pos`` gets there."""

    def __init__(self):
        self._turns: collections.deque = collections.deque()   # (end_phys_offset, queues) in log order

    def written(self, queues: set, end: int) -> None:
        turns = self._turns
        if len(turns) >= UNFLUSHED_TURNS_MAX:
            _, older = turns.pop()
            queues = queues | older
        turns.append((end, queues))

    def flushed(self, flushed_pos: int) -> set:
        """The queues whose entries the flush made readable since the last call."""
        turns = self._turns
        readable: set = set()
        while turns and turns[0][0] <= flushed_pos:
            readable |= turns.popleft()[1]
        return readable
