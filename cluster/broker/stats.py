"""Rates from counters: what brokerStatus calls putTps and getTransferedTps, and ConsumeStats' consumeTps.

Counters only grow (messages stored, messages served per topic and group); once a second
the broker samples them here, and a rate over a window is the counter's growth over the
samples that span it. RocketMQ reports its TPS over 10 s, 1 min and 10 min windows in one
string, ``"10s 60s 600s"``, each with two decimals.
"""

from __future__ import annotations

from collections import deque

WINDOWS_S = (10, 60, 600)
SAMPLE_INTERVAL_S = 1.0


class Rate:
    """One counter's samples over the longest window."""

    def __init__(self, horizon_s: float = WINDOWS_S[-1]):
        self.horizon_s = horizon_s
        self.samples: deque[tuple[float, int]] = deque()

    def sample(self, now_s: float, total: int) -> None:
        self.samples.append((now_s, total))
        while len(self.samples) > 2 and now_s - self.samples[1][0] >= self.horizon_s:
            self.samples.popleft()

    def per_second(self, window_s: float) -> float:
        """Growth per second over the last ``window_s`` (less while fewer samples exist)."""
        if len(self.samples) < 2:
            return 0.0
        newest_s, newest = self.samples[-1]
        oldest_s, oldest = self.samples[0]
        for at_s, total in reversed(self.samples):
            oldest_s, oldest = at_s, total
            if newest_s - at_s >= window_s:
                break
        elapsed = newest_s - oldest_s
        return (newest - oldest) / elapsed if elapsed > 0 else 0.0

    def tps_text(self) -> str:
        return " ".join(f"{self.per_second(w):.2f}" for w in WINDOWS_S)


class KeyedRates:
    """A ``Rate`` per key of a counter table (for example (topic, group) -> messages served)."""

    def __init__(self):
        self.rates: dict[object, Rate] = {}
        self._last_sample_s: float | None = None

    def sample(self, now_s: float, counters: dict) -> None:
        for key, total in counters.items():
            rate = self.rates.get(key)
            if rate is None:
                rate = self.rates[key] = Rate()
                if self._last_sample_s is not None:
                    # A key new since the last sample counted 0 then: its first messages are a rate too.
                    rate.sample(self._last_sample_s, 0)
            rate.sample(now_s, total)
        self._last_sample_s = now_s

    def per_second(self, key, window_s: float = WINDOWS_S[1]) -> float:
        rate = self.rates.get(key)
        return rate.per_second(window_s) if rate is not None else 0.0

    def forget(self, keep) -> None:
        """Drop keys for which ``keep(key)`` is false (a deleted topic or group)."""
        for key in [k for k in self.rates if not keep(k)]:
            del self.rates[key]
