"""Scheduled (delayed) messages: the delay levels and how a delayed record is parked.

A message with property DELAY=n (1..levels) is stored in ``SCHEDULE_TOPIC_XXXX`` queue
n-1 with REAL_TOPIC and REAL_QID naming where it belongs (RocketMQ 4's scheme). Its
ConsumeQueue entry's tag field holds the delivery time (store time + the level's
delay) instead of a tag hash (SPEC §4), so the schedule service can tell from the
queue alone whether the head entry is due. Pure: no I/O.
"""

from __future__ import annotations

import re

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# RocketMQ 5's exact delivery time (ms since the epoch); parked in the timer queue, one past the levels.
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
DELAY_LEVELS_DEFAULT = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def parse_levels(text: str) -> tuple[int, ...]:
    """Delays in ms of levels 1..n from RocketMQ's messageDelayLevel text ("1s 5s 10s ... 2h";
    ``ms`` is accepted too). ValueError when a level does not parse."""
    levels = []
    for word in text.split():
        match = _LEVEL.match(word)
        if not match:
            raise ValueError(f"delay level {word!r} is not a number with a unit (ms, s, m, h, d)")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    if not levels:
        raise ValueError("no delay levels")
    return tuple(levels)


def queue_of_level(level: int) -> int:
    return level - 1


def level_of_queue(queue_id: int) -> int:
    return queue_id + 1


def deliver_time_ms(store_timestamp_ms: int, level: int, levels_ms: tuple[int, ...]) -> int:
    """When a record parked at ``level`` is due."""
    return store_timestamp_ms + levels_ms[min(max(level, 1), len(levels_ms)) - 1]
