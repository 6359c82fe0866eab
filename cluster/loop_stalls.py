"""The event loop thread's own stalls, which a request's wait must not be charged with: a check for
unread input that was itself paused (``empty_as_of``), and the time the thread waited for a CPU
(``RunQueueDelay``). The loop (``event_loop.py``) measures them; overload's fast failure
(``fast_failure.py``) discounts them. Below both, so the loop needs nothing of the policy above it.
"""

from __future__ import annotations

import collections
import time
from typing import Callable, TypeVar

T = TypeVar("T")

# A check for unread input that took longer than this, from its clock read to its answer, was
# stalled (the process paused in between).
STALLED_CHECK_S = 0.005


def empty_as_of(checked_at: float, look_again: Callable[[], T]) -> tuple[float, T | None]:
    """(since when, what a second look found) for a door a check begun at ``checked_at`` found
    empty. Normally (``checked_at``, None). A stalled check (see STALLED_CHECK_S) is followed by
    ``look_again()``, the clock read first: found empty, the door is known empty as of that later
    time, so a stall that ended before a request arrived is not the request's wait (a fresh-clone
    run saw a broker stalled 428 ms refuse the next plain request); input found then may have
    arrived during the stall, so ``checked_at`` stays with it and no wait is underestimated."""
    later = time.monotonic()
    if later - checked_at <= STALLED_CHECK_S:
        return checked_at, None
    found = look_again()
    return (checked_at, found) if found else (later, None)


# Linux's per-thread scheduler statistics: CPU time, time spent runnable but waiting for a CPU
# (run_delay), and time slices, in ns. /proc/thread-self names the reading thread (the loop's).
SCHEDSTAT_PATH = "/proc/thread-self/schedstat"


class RunQueueDelay:
    """How long the loop's thread itself waited for a CPU (schedstat's run_delay) since a moment.

    RocketMQ stamps a request when its Netty thread has read it, so the time its broker's JVM waits for
    a CPU before then never counts as time in queue. The remoting door's kernel stamps (and the native
    door's estimate) count it: on a machine loaded by other processes (load 17-20 on 2 cores)
    a broker that was runnable but not running for 170 ms refused sends it would have served in
    microseconds, with 1 request in queue. A wait charged against a bound is therefore the wall wait less
    this thread's run-queue delay over it: what its own work (serving what came before) and its own
    stalls (GIL, page faults, disk) held the request up, the analogue of RocketMQ's time in queue. A
    broker short of CPU for its own work still refuses: its run-queue delay is small then; and so does a
    door that read more than QUEUED_MAX requests since it was last empty (real overload).

    The loop samples the counter every SAMPLE_INTERVAL_S (``sample``); ``since(t)`` takes the newest
    sample at or before ``t``, so it may also discount run-queue delay of up to one interval before the
    request arrived; a wait older than every kept sample is discounted from the oldest (less, never more,
    than its own share). Where the kernel keeps no schedstat nothing is discounted."""

    SAMPLE_INTERVAL_S = 0.05
    # Only a door this little behind is forgiven: a broker with more in front of a request than it
    # serves in a few milliseconds once it runs is overloaded, whoever took its CPU (a flood from a
    # load generator on the same cores starves it too, and must still be refused: the C++ client's
    # overload test offered 10x and saw its refusals slowed to sync-flush waits when they were not).
    QUEUED_MAX = 64
    SAMPLES_KEPT = 128   # 6.4 s: longer waits than that are past every bound but the heartbeat's

    def __init__(self, path: str = SCHEDSTAT_PATH, clock: Callable[[], float] = time.monotonic):
        self.path = path
        self.clock = clock
        self._samples: collections.deque = collections.deque(maxlen=self.SAMPLES_KEPT)
        self.available = self.read() is not None
        self.sample()

    def read(self) -> float | None:
        """This thread's run-queue delay so far, seconds; None where the kernel does not keep it."""
        try:
            with open(self.path, "rb") as stats:
                return int(stats.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return None

    def sample(self) -> None:
        delay = self.read()
        if delay is not None:
            self._samples.append((self.clock(), delay))

    def since(self, moment: float) -> float:
        """Seconds this thread waited for a CPU from ``moment`` (monotonic) to now (see the class)."""
        samples = self._samples
        now_delay = self.read() if samples else None
        if now_delay is None:
            return 0.0
        base = samples[0][1]
        for when, delay in reversed(samples):
            if when <= moment:
                base = delay
                break
        return max(0.0, now_delay - base)
