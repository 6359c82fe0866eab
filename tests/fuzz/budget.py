"""The fuzz tests' time budget and their tally of inputs tried.

``FUZZ_SECONDS`` (environment, default ``FUZZ_SECONDS_DEFAULT``) is the fuzzing time of one run of
the fuzz tests that were selected, shared out by each test's ``@pytest.mark.fuzz(weight=...)``
(``tests/fuzz/conftest.py``): the whole directory spends about that long fuzzing, one test run
alone gets all of it. ``run_hypothesis`` spends a test's share on one target: hypothesis batches,
each sized from the last one's pace to fill what is left, so a slow target still stops near its
time and a fast one tries as many inputs as it can. Every input tried is counted in ``TALLY``,
which the session's end prints and writes as JSON (the issue's "fuzz inputs tried").
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings

FUZZ_SECONDS_DEFAULT = 40.0
# A fuzz test may take its share plus this before pytest-timeout calls it hung (start-up of a
# cluster or a subprocess, the last batch's overshoot, a shrink after a failure).
TIMEOUT_SLACK_S = 240
BATCH_FIRST = 20
BATCH_MIN = 5
BATCH_MAX = 20_000


def total_seconds() -> float:
    raw = os.environ.get("FUZZ_SECONDS", "")
    try:
        value = float(raw) if raw.strip() else FUZZ_SECONDS_DEFAULT
    except ValueError:
        raise ValueError(f"FUZZ_SECONDS must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"FUZZ_SECONDS must be positive, not {raw!r}")
    return value


@dataclass
class TargetTally:
    engine: str
    inputs: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    note: str = ""

    def tried(self, elapsed_s: float, count: int = 1) -> None:
        self.inputs += count
        self.slowest_s = max(self.slowest_s, elapsed_s / max(count, 1))


class Tally:
    """Inputs tried per target in this pytest process."""

    def __init__(self):
        self.targets: dict[str, TargetTally] = {}

    def target(self, name: str, engine: str) -> TargetTally:
        tally = self.targets.get(name)
        if tally is None:
            tally = self.targets[name] = TargetTally(engine)
        return tally

    def merge(self, reported: dict) -> None:
        """Add another process's ``as_json`` (an xdist worker's)."""
        for name, row in reported.items():
            tally = self.target(name, row["engine"])
            tally.inputs += row["inputs"]
            tally.seconds += row["seconds"]
            tally.slowest_s = max(tally.slowest_s, row["slowest_input_s"])

    def as_json(self) -> dict:
        return {name: {"engine": t.engine, "inputs": t.inputs, "seconds": round(t.seconds, 2),
                       "slowest_input_s": round(t.slowest_s, 4), **({"note": t.note} if t.note else {})}
                for name, t in sorted(self.targets.items())}

    def table(self) -> str:
        rows = [("target", "engine", "inputs", "seconds", "slowest input s")]
        rows += [(name, t.engine, str(t.inputs), f"{t.seconds:.1f}", f"{t.slowest_s:.4f}")
                 for name, t in sorted(self.targets.items())]
        rows.append(("total", "", str(sum(t.inputs for t in self.targets.values())),
                     f"{sum(t.seconds for t in self.targets.values()):.1f}", ""))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w)
                                   in enumerate(zip(row, widths))) for row in rows)


TALLY = Tally()


def fuzz_settings(max_examples: int) -> settings:
    """Random generation only (no example database: a fuzz run leaves no files in the checkout);
    shrinking stays on, so a failure is reported at its smallest."""
    return settings(max_examples=max_examples, database=None, deadline=None,
                    phases=(Phase.generate, Phase.target, Phase.shrink),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


def run_hypothesis(target: str, seconds: float, strategy, check) -> TargetTally:
    """Call ``check(value)`` on values of ``strategy`` for about ``seconds``; any exception
    ``check`` lets out fails the test with hypothesis's smallest falsifying value."""
    tally = TALLY.target(target, "hypothesis")
    started = time.monotonic()
    deadline = started + seconds

    def one(value) -> None:
        if time.monotonic() >= deadline:
            return   # the batch's remaining examples past the deadline are drawn, not tried nor counted
        t0 = time.perf_counter()
        try:
            check(value)
        finally:
            tally.tried(time.perf_counter() - t0)

    batch = BATCH_FIRST
    try:
        while True:
            batch_started, before = time.monotonic(), tally.inputs
            fuzz_settings(batch)(given(strategy)(one))()
            now = time.monotonic()
            if now >= deadline:
                return tally
            pace = (now - batch_started) / max(tally.inputs - before, 1)
            # Half of what is left at the last batch's pace: inputs differ in cost (a deep one can
            # take 1000 times a shallow one's), so the batches shrink as the deadline nears.
            batch = max(BATCH_MIN, min(BATCH_MAX, int((deadline - now) / 2 / pace)))
    finally:
        tally.seconds += time.monotonic() - started
