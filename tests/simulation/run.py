"""Running seeds: one (in a fresh directory, removed after) or many under a time budget."""

from __future__ import annotations

import tempfile
import time

from tests.simulation.world import STEPS, Outcome, World


def run_seed(seed: int, steps: int = STEPS, trace: bool = False) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"sim-{seed}-") as root:
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
