"""The ConsumeQueue entries of the newest writes, known to the broker before the reput worker has
dispatched them: a parked pull is answered at write time, without waiting for the reput worker.

A caught-up consumer's long poll used to wait for the reput process to be woken, scan and index
the record, and ping the broker back: two wake-ups of sleeping processes, each tens of
microseconds on a small VM, before the broker could answer. The broker assigned the queue offset
and wrote the record itself, so it keeps, per queue, the runs of records it wrote since the
reput last caught up: ``(first queue offset, count, phys of the first, record ends, base)``, where
record k ends at phys ``phys + ends[k] - base`` (``ends`` as the writer had them: cumulative sizes,
or the C batch encoder's segment positions; nothing is computed per message here). A pull served
from them reads the same bytes the ConsumeQueue entries will point at, the same offsets in the
same order; it never sees more than the ConsumeQueue will hold.

Only pulls without a tag filter are served from here (the tag hash is the reput's work), only
under async flush (under sync flush consumers read flushed records only), and only the master's
own writes (a slave appends replicated bytes). Memory: runs wholly below ``dispatched_pos`` are
dropped at the queue's next write, and at most ``RUNS_PER_QUEUE_MAX`` are kept per queue.
"""

from __future__ import annotations

import collections

RUNS_PER_QUEUE_MAX = 256


class RecentWrites:
    def __init__(self):
        self._by_queue: dict[tuple[str, int], collections.deque] = {}
        self._touched: set[tuple[str, int]] = set()

    def add(self, key: tuple[str, int], first_offset: int, count: int, phys: int, ends, base: int,
            dispatched_pos: int) -> None:
        runs = self._by_queue.get(key)
        if runs is None:
            runs = self._by_queue[key] = collections.deque()
        # The reput has indexed these: the ConsumeQueue serves them now.
        while runs and runs[0][2] + runs[0][3][-1] - runs[0][4] <= dispatched_pos:
            runs.popleft()
        if len(runs) >= RUNS_PER_QUEUE_MAX:
            runs.popleft()
        runs.append((first_offset, count, phys, ends, base))
        self._touched.add(key)

    def take_touched(self) -> set[tuple[str, int]]:
        """The queues written since the last call."""
        touched = self._touched
        if touched:   # a turn that wrote nothing allocates nothing
            self._touched = set()
        return touched

    def end_offset(self, key: tuple[str, int]) -> int:
        """The queue offset after the newest write kept (0: none kept)."""
        runs = self._by_queue.get(key)
        if not runs:
            return 0
        first, count = runs[-1][0], runs[-1][1]
        return first + count

    def select(self, key: tuple[str, int], offset: int, max_count: int, max_bytes: int,
               visible_end: int) -> tuple[list[tuple[int, int]], int]:
        """``([(phys, size) of each contiguous chunk], count)`` of the records from queue offset
        ``offset`` on, at most ``max_count`` records and ``max_bytes`` (at least one record), none
        ending past ``visible_end``; ``([], 0)`` when the runs kept do not hold ``offset``."""
        runs = self._by_queue.get(key)
        chunks: list[tuple[int, int]] = []
        got = got_bytes = 0
        if not runs:
            return chunks, 0
        for first, count, phys, ends, base in runs:
            if first + count <= offset:
                continue
            if first > offset or got >= max_count:
                break
            i = offset - first
            start = ends[i - 1] - base if i else 0
            j = min(count, i + max_count - got)
            while j > i and (phys + ends[j - 1] - base > visible_end or
                             (got + j - i > 1 and got_bytes + ends[j - 1] - base - start > max_bytes)):
                j -= 1
            if j == i:
                break
            chunks.append((phys + start, ends[j - 1] - base - start))
            got += j - i
            got_bytes += ends[j - 1] - base - start
            offset += j - i
            if j < count:
                break
        return chunks, got

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._by_queue if k[0] == topic]:
            del self._by_queue[key]
