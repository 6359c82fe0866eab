"""Time, as one replaceable object.

Everything that schedules, expires or retries by the clock (delay levels, transaction
checks, consumer retries, lock and client expiry, flush and heartbeat stamps) asks a
:class:`Clock` instead of calling :mod:`time` itself, so a test can hand it a
:class:`ManualClock` and move time forward without waiting for it.

Two readings, as in RocketMQ: ``now_ms`` is wall time in epoch milliseconds (what lands in
records and on disk, and what other processes compare with theirs); ``monotonic`` is seconds
for measuring intervals and deadlines inside one process (never stored, never sent).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime


class Clock:
    """The system clock. Stateless: share :data:`SYSTEM_CLOCK`."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK = Clock()


class ManualClock(Clock):
    """A clock that moves only when told to: ``advance`` it, and sleepers wake when their time comes.

    ``sleep`` blocks the calling thread until another thread advances the clock past its wake
    time (or returns at once for a non-positive duration), so code under test that sleeps
    between attempts runs exactly as far as the test lets time pass.
    """

    def __init__(self, now_ms: int = 1_700_000_000_000, monotonic: float = 1_000.0):
        self._now_ms = now_ms
        self._monotonic = monotonic
        self._changed = threading.Condition()

    def now_ms(self) -> int:
        with self._changed:
            return self._now_ms

    def monotonic(self) -> float:
        with self._changed:
            return self._monotonic

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not run backwards")
        with self._changed:
            self._monotonic += seconds
            self._now_ms += int(round(seconds * 1000))
            self._changed.notify_all()

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._changed:
            wake_at = self._monotonic + seconds
            # Bounded: a test that forgets to advance the clock fails instead of hanging forever.
            if not self._changed.wait_for(lambda: self._monotonic >= wake_at, timeout=60.0):
                raise TimeoutError(f"ManualClock.sleep({seconds}): nobody advanced the clock within 60 s")


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds from epoch milliseconds or an ISO 8601 time (local unless it names a zone),
    as the CLI's and the console's time fields take them; ValueError for anything else."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{text[:40]!r} is neither epoch milliseconds nor an ISO 8601 time "
                         f"(2026-01-31T12:00:00)") from None
