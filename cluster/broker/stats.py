"""Rates and windows from counters: what brokerStatus calls putTps and getTransferedTps,
ConsumeStats' consumeTps, and RocketMQ's BrokerStatsData (VIEW_BROKER_STATS_DATA 315, which
mqadmin statsAll reads for #InTPS, #OutTPS, #InMsg24Hour and #OutMsg24Hour).

Counters only grow (messages stored, messages served per topic and group); once a second
the broker samples them here, and a rate over a window is the counter's growth over the
samples that span it. RocketMQ reports its TPS over 10 s, 1 min and 10 min windows in one
string, ``"10s 60s 600s"``, each with two decimals.

BrokerStatsData is RocketMQ's StatsItem per key (a topic for TOPIC_PUT_*, ``topic@group`` for
GROUP_GET_*): over the last minute, hour and day, the counter's growth (``sum``), that growth per
second (``tps``) and per call (``avgpt``: messages or bytes per put or per pull). RocketMQ keeps 7
samples 10 s apart, 7 samples 10 min apart and 25 samples an hour apart; here the minute keeps a
sample a second, the hour one a minute and the day one every ten minutes, and every window ends
at the latest sample (at most a second old), so a put shows in all three at once.
"""

from __future__ import annotations

import datetime
import time
from collections import deque

from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, field_str, to_json_bytes
from rocketbox.cluster.wire_format import Command

WINDOWS_S = (10, 60, 600)
SAMPLE_INTERVAL_S = 1.0
# BrokerStatsData's windows: (field, length s, seconds between the samples kept for it).
STATS_WINDOWS = (("statsMinute", 60, 1), ("statsHour", 3600, 60), ("statsDay", 86400, 600))
# A sample is due a little early rather than a whole step late: the once-a-second timer drifts.
_STEP_SLACK_S = 0.5
# A counter's point: (messages, bytes, calls); BrokerStatsData's value is one of the first two.
MESSAGES, BYTES, CALLS = 0, 1, 2
# statsName -> (which table, which value): RocketMQ's BrokerStatsManager names.
STATS_NAMES = {"TOPIC_PUT_NUMS": ("topic_puts", MESSAGES), "TOPIC_PUT_SIZE": ("topic_puts", BYTES),
               "GROUP_GET_NUMS": ("group_gets", MESSAGES), "GROUP_GET_SIZE": ("group_gets", BYTES)}


def _oldest_in_window(samples, newest_s: float, window_s: float):
    """The latest sample at least ``window_s`` older than ``newest_s``, else the oldest there is."""
    oldest = samples[0]
    for sample in reversed(samples):
        oldest = sample
        if newest_s - sample[0] >= window_s:
            break
    return oldest


def _keep_window(samples: deque, now_s: float, window_s: float) -> None:
    """Drop samples no window needs: one at or beyond the window's start is kept, no older one."""
    while len(samples) > 2 and now_s - samples[1][0] >= window_s:
        samples.popleft()


class Rate:
    """One counter's samples over the longest window."""

    def __init__(self, horizon_s: float = WINDOWS_S[-1]):
        self.horizon_s = horizon_s
        self.samples: deque[tuple[float, int]] = deque()

    def sample(self, now_s: float, total: int) -> None:
        self.samples.append((now_s, total))
        _keep_window(self.samples, now_s, self.horizon_s)

    def per_second(self, window_s: float) -> float:
        """Growth per second over the last ``window_s`` (less while fewer samples exist)."""
        if len(self.samples) < 2:
            return 0.0
        newest_s, newest = self.samples[-1]
        oldest_s, oldest = _oldest_in_window(self.samples, newest_s, window_s)
        elapsed = newest_s - oldest_s
        return (newest - oldest) / elapsed if elapsed > 0 else 0.0

    def tps_text(self) -> str:
        return " ".join(f"{self.per_second(w):.2f}" for w in WINDOWS_S)


class CounterWindows:
    """One key's StatsItem: samples ``(when, messages, bytes, calls)`` for each of STATS_WINDOWS."""

    __slots__ = ("rings",)

    def __init__(self):
        self.rings = tuple(deque() for _ in STATS_WINDOWS)

    def sample(self, now_s: float, point: tuple[int, int, int]) -> None:
        sample = (now_s, *point)
        for index, (ring, (_name, window_s, step_s)) in enumerate(zip(self.rings, STATS_WINDOWS)):
            # The first ring takes every sample: every window ends at its newest.
            if index == 0 or not ring or now_s - ring[-1][0] >= step_s - _STEP_SLACK_S:
                ring.append(sample)
                _keep_window(ring, now_s, window_s)

    def stats(self, value: int) -> dict[str, dict]:
        """BrokerStatsData: per window ``sum``, ``tps`` and ``avgpt`` of ``value`` (MESSAGES or BYTES)."""
        newest = self.rings[0][-1]
        out = {}
        for ring, (name, window_s, _step_s) in zip(self.rings, STATS_WINDOWS):
            oldest = _oldest_in_window(ring, newest[0], window_s)
            grown = newest[1 + value] - oldest[1 + value]
            calls = newest[1 + CALLS] - oldest[1 + CALLS]
            elapsed = newest[0] - oldest[0]
            out[name] = {"sum": grown, "tps": round(grown / elapsed, 2) if elapsed > 0 else 0.0,
                         "avgpt": round(grown / calls, 2) if calls > 0 else 0.0}
        return out

    def minute_tps(self) -> float:
        return self.stats(MESSAGES)["statsMinute"]["tps"]


class KeyedStats:
    """A ``CounterWindows`` per key of a counter table (a topic, or (topic, group))."""

    def __init__(self):
        self.windows: dict[object, CounterWindows] = {}
        self._last_sample_s: float | None = None

    def sample(self, now_s: float, points: dict) -> None:
        for key, point in points.items():
            windows = self.windows.get(key)
            if windows is None:
                windows = self.windows[key] = CounterWindows()
                if self._last_sample_s is not None:
                    # A key new since the last sample counted 0 then: its first messages are a rate too.
                    windows.sample(self._last_sample_s, (0, 0, 0))
            windows.sample(now_s, point)
        self._last_sample_s = now_s

    def get(self, key) -> CounterWindows | None:
        return self.windows.get(key)

    def minute_tps(self, key) -> float:
        windows = self.windows.get(key)
        return windows.minute_tps() if windows is not None else 0.0


class DailyTotals:
    """RocketMQ's BrokerStats: two counters' values at the last two local midnights the broker saw
    (brokerStatus' msgPutTotalTodayMorning, ...YesterdayMorning; 0 until a midnight passed, as
    RocketMQ's are), so a day's traffic is today's mark minus yesterday's."""

    def __init__(self, today: int | None = None):
        self.day = today
        self.today_morning = (0, 0)
        self.yesterday_morning = (0, 0)

    def sample(self, day: int, totals: tuple[int, int]) -> None:
        """``day``: the local date's ordinal now; ``totals``: (messages stored, messages served)."""
        if self.day is not None and day != self.day:
            self.yesterday_morning, self.today_morning = self.today_morning, totals
        self.day = day


def _local_day() -> int:
    return datetime.date.today().toordinal()


class BrokerStats:
    """The broker's sampled counters: brokerStatus' rates and VIEW_BROKER_STATS_DATA's windows.
    ``sample`` runs once a second on the broker's loop."""

    def __init__(self, sender, puller):
        self.sender = sender
        self.puller = puller
        self.put_rate = Rate()
        self.served_rate = Rate()
        self.found_rate = Rate()          # pulls that found messages
        self.daily = DailyTotals(_local_day())
        self.topic_puts = KeyedStats()    # topic -> (messages, bytes, puts)
        self.group_gets = KeyedStats()    # (topic, group) -> (messages, bytes, pulls that found some)

    def sample(self) -> None:
        now_s = time.monotonic()
        self.put_rate.sample(now_s, self.sender.messages_stored)
        self.served_rate.sample(now_s, self.puller.messages_served)
        self.found_rate.sample(now_s, sum(self.puller.pulls_by_group.values()))
        self.daily.sample(_local_day(), (self.sender.messages_stored, self.puller.messages_served))
        puts: dict[str, list[int]] = {}
        for row in self.sender.traffic_in.snapshot():   # per (topic, message type): add the types up
            point = puts.setdefault(row["topic"], [0, 0, 0])
            point[MESSAGES] += row["messages"]
            point[BYTES] += row["bytes"]
            point[CALLS] += sum(row["sizeBuckets"])     # one size is recorded per put
        self.topic_puts.sample(now_s, {topic: tuple(point) for topic, point in puts.items()})
        served_bytes, pulls = self.puller.served_bytes_by_group, self.puller.pulls_by_group
        self.group_gets.sample(now_s, {key: (messages, served_bytes.get(key, 0), pulls.get(key, 0))
                                       for key, messages in self.puller.served_by_group.items()})

    @answers_refusals
    def on_view_stats(self, request: Command, reply=None) -> Command:
        """VIEW_BROKER_STATS_DATA: BrokerStatsData of one stats item, RocketMQ's answer and wording."""
        name = field_str(request, "statsName")
        key = field_str(request, "statsKey")
        if name not in STATS_NAMES:
            raise ProtocolError(f"statsName {name!r} is not kept here; these are: {', '.join(sorted(STATS_NAMES))}")
        table_name, value = STATS_NAMES[name]
        table = getattr(self, table_name)
        # GROUP_GET_* keys are "topic@group" (topic and group names cannot hold '@').
        windows = table.get(tuple(key.split("@", 1)) if table is self.group_gets else key)
        if windows is None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"The stats <{name}> <{key}> not exist")
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(windows.stats(value)))
