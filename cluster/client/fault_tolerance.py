"""The producer's latency fault tolerance (SPEC §2; RocketMQ's MQFaultStrategy).

Every send's outcome is recorded per broker: its latency picks, from RocketMQ's table,
how long the broker is avoided (latency >= 50, 100, 550, 1000, 2000, 3000, 15000 ms ->
0, 0, 30, 60, 120, 180, 600 s). A failed send (no answer in time, connection lost, a
broker-side error code) counts as an *isolation*: a latency of 30000 ms, so 600 s.
Queue choice then goes round-robin over the queues whose broker is available, also
skipping the broker of the previous failed attempt; when no broker is available it
falls back to the least bad one (the one whose avoidance ends first).

Pure: no I/O, and the clock is injected (``clock()`` in seconds, monotonic), so tests
drive time by hand. Thread-safe: a sync send, the async I/O thread and other callers
update one table.

Two choices differ from RocketMQ 4.x, both as RocketMQ 5 does: a new record never
shortens an avoidance already running (4.x overwrote it, so a fast answer to a request
sent before a failure lifted the isolation at once), and a retry also skips the
previous attempt's broker when fault tolerance is on.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.config import ClientConfig, latency_table_problem

# RocketMQ's MQFaultStrategy (4.x), as SPEC §2 states them; ClientConfig holds them as settings.
_DEFAULTS = ClientConfig()
LATENCY_MAX_MS = _DEFAULTS.send_latency_max_ms
NOT_AVAILABLE_DURATION_MS = _DEFAULTS.send_not_available_duration_ms
# The latency a failed send counts as (RocketMQ 4.x: updateFaultItem(..., isolation=true)).
ISOLATION_LATENCY_MS = _DEFAULTS.send_isolation_latency_ms


def not_available_duration_ms(latency_ms: float, latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
                              durations_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS) -> int:
    """How long to avoid a broker that took ``latency_ms``: the duration of the highest bound reached."""
    for bound, duration in zip(reversed(latency_max_ms), reversed(durations_ms)):
        if latency_ms >= bound:
            return duration
    return 0


@dataclass(frozen=True)
class FaultItem:
    """What is known of one broker: its last latency and when it may be used again."""

    broker: str
    latency_ms: int           # the last send's (an isolation counts as the isolation latency)
    available_at_s: float     # on the tolerance's clock
    isolated: bool            # the last send failed


class LatencyFaultTolerance:
    def __init__(self, latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
                 durations_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
                 isolation_latency_ms: int = ISOLATION_LATENCY_MS,
                 clock: Callable[[], float] = time.monotonic):
        problem = latency_table_problem(latency_max_ms, durations_ms, isolation_latency_ms)
        if problem:
            raise ValueError(problem)
        self.latency_max_ms = tuple(latency_max_ms)
        self.durations_ms = tuple(durations_ms)
        self.isolation_latency_ms = isolation_latency_ms
        self.clock = clock
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: ClientConfig, clock: Callable[[], float] = time.monotonic) -> "LatencyFaultTolerance":
        return cls(cfg.send_latency_max_ms, cfg.send_not_available_duration_ms, cfg.send_isolation_latency_ms, clock)

    # ------------------------------------------------------------ recording

    def update(self, broker: str, latency_ms: float, isolation: bool = False) -> int:
        """Record a send to ``broker``; returns the avoidance it set (ms, 0 for none)."""
        effective_ms = int(self.isolation_latency_ms if isolation else latency_ms)
        duration_ms = not_available_duration_ms(effective_ms, self.latency_max_ms, self.durations_ms)
        now = self.clock()
        with self._lock:
            old = self._items.get(broker)
            available_at = now + duration_ms / 1000
            if old is not None and old.available_at_s > available_at:
                available_at = old.available_at_s  # never shorten an avoidance already running
            self._items[broker] = FaultItem(broker, effective_ms, available_at, isolation)
        return duration_ms

    # ------------------------------------------------------------ reading

    def is_available(self, broker: str) -> bool:
        item = self._items.get(broker)
        return item is None or self.clock() >= item.available_at_s

    def unavailable_for_ms(self, broker: str) -> int:
        """Milliseconds until ``broker`` is used again (0: available now)."""
        item = self._items.get(broker)
        return 0 if item is None else _ms_until(item.available_at_s, self.clock())

    def snapshot(self) -> dict[str, dict]:
        """broker -> {latency_ms, isolated, available, unavailable_for_ms}: for status and tests."""
        with self._lock:
            items = list(self._items.values())
        now = self.clock()
        return {item.broker: {"latency_ms": item.latency_ms, "isolated": item.isolated,
                              "available": now >= item.available_at_s,
                              "unavailable_for_ms": _ms_until(item.available_at_s, now)}
                for item in items}

    def least_bad(self, brokers: Sequence[str], avoid: str | None = None) -> str:
        """Of ``brokers`` (none available), the one whose avoidance ends first, lower latency on ties;
        ``avoid`` only when it is the one broker."""
        candidates = [b for b in brokers if b != avoid] or list(brokers)

        def badness(broker: str):
            item = self._items.get(broker)
            return (float("-inf"), 0) if item is None else (item.available_at_s, item.latency_ms)
        return min(candidates, key=badness)

    # ------------------------------------------------------------ choosing

    def select(self, queues: Sequence[MessageQueue], start: int, avoid: str | None = None) -> MessageQueue:
        """Round-robin from ``start`` over queues of available brokers other than ``avoid``; then
        any available broker's; then a queue of the least bad broker."""
        n = len(queues)
        now = self.clock()
        items = self._items
        fallback = None
        for i in range(n):
            queue = queues[(start + i) % n]
            item = items.get(queue.broker_name)
            if item is not None and now < item.available_at_s:
                continue
            if queue.broker_name != avoid:
                return queue
            if fallback is None:
                fallback = queue
        if fallback is not None:
            return fallback
        broker = self.least_bad(sorted({q.broker_name for q in queues}), avoid)
        own = [q for q in queues if q.broker_name == broker]
        return own[start % len(own)]


def _ms_until(when_s: float, now_s: float) -> int:
    """Whole milliseconds from ``now_s`` to ``when_s``, rounded up; 0 once it has passed."""
    return max(0, int((when_s - now_s) * 1000 + 0.999))


def select_round_robin(queues: Sequence[MessageQueue], start: int, avoid: str | None = None) -> MessageQueue:
    """Without fault tolerance (RocketMQ's default): round-robin, skipping the last failed broker."""
    n = len(queues)
    for i in range(n):
        queue = queues[(start + i) % n]
        if queue.broker_name != avoid:
            return queue
    return queues[start % n]
