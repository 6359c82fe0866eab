"""Running seeds: one (in a fresh directory, removed after) or many under a time budget."""

from __future__ import annotations

import os
import tempfile
import time

from tests.simulation.world import STEPS, Outcome, World


# The simulated disk is the durable image: a real fsync buys nothing, so the store lives in memory
# where there is a tmpfs (a sync there is nearly free; a seed runs several times faster).
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def run_seed(seed: int, steps: int = STEPS, trace: bool = False) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"sim-{seed}-", dir=SCRATCH) as root:
        return World(seed, root, steps, trace).run()


def run_seeds(first: int, count: int, budget_s: float, steps: int = STEPS) -> tuple[list[Outcome], float]:
    """Seeds ``first``, ``first + 1``, ... until ``count`` ran or ``budget_s`` passed (the wall clock
    bounds the run, never a seed's history); the outcomes and the seconds taken."""
    started = time.monotonic()
    outcomes = []
    for seed in range(first, first + count):
        if time.monotonic() - started >= budget_s:
            break
        outcomes.append(run_seed(seed, steps))
    return outcomes, time.monotonic() - started


def run_listed(seeds) -> list[Outcome]:
    """Each of ``seeds`` (those that once found a bug), whatever the time."""
    return [run_seed(seed) for seed in seeds]
