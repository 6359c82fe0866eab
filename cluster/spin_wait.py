"""Poll for an answer a little while before sleeping for it: a quick answer then
costs no thread wake-up.

Measured on this 2-core VM (perf/RESULTS.md, "Where one message's time goes"): waking a thread
that sleeps in the kernel costs far more than the work it is woken for. A Python TCP ping-pong
took 120 us a round trip with both ends sleeping in recv and 38 us with the caller polling; the
broker's send of an answer took ~100 us of its CPU when it had to wake the caller. So a sync
call first polls for its answer without sleeping, for about twice the time answers have been
taking, at most ``spin_max_s``; a broker that answers slower than that (far away, or loaded) is
waited for by sleeping at once, so the CPU spent polling stays a fraction of the time saved.
Each poll that finds nothing yields the core: under a steady stream of sync sends a producer that
polled without yielding held a core the consumer and the broker's workers needed (end to end at 10k
msg/s, p50 1,035 -> 745 us and p99 5.5 -> 2.1 ms with the yield; a lone send's p50 unchanged).
"""

from __future__ import annotations

import os
import time
from typing import Callable

# The share of a new answer time in the running estimate.
TYPICAL_WEIGHT = 0.1


class SpinWait:
    """One client's estimate of how soon answers come; thread-safe enough (a float per update)."""

    def __init__(self, spin_max_s: float):
        self.spin_max_s = spin_max_s
        self.typical_s = spin_max_s / 2

    def budget_s(self) -> float:
        """How long the next call polls before it sleeps (0: sleep at once)."""
        typical = self.typical_s
        return 0.0 if not self.spin_max_s or typical > self.spin_max_s else min(self.spin_max_s, 2 * typical)

    def answered(self, waited_s: float) -> None:
        self.typical_s += TYPICAL_WEIGHT * (waited_s - self.typical_s)

    def poll(self, ready: Callable[[], object], deadline: float) -> object:
        """``ready()`` until it returns something other than None, for at most the budget (and
        never past ``deadline``, a time.monotonic()); None when the caller should sleep for it."""
        budget = self.budget_s()
        if not budget:
            return None
        end = min(time.monotonic() + budget, deadline)
        while True:
            result = ready()
            if result is not None or time.monotonic() >= end:
                return result
            os.sched_yield()
