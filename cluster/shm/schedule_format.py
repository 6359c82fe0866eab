"""Scheduled (delayed) messages: how a delayed record is parked.

A message with property DELAY=n (1..levels) is stored in ``SCHEDULE_TOPIC_XXXX`` queue
n-1 with REAL_TOPIC and REAL_QID naming where it belongs (RocketMQ 4's scheme). Its
ConsumeQueue entry's tag field holds the delivery time (store time + the level's
delay) instead of a tag hash (SPEC §4), so the schedule service can tell from the
queue alone whether the head entry is due. The levels' delays are a setting
(``cluster.config.parse_levels``). Pure: no I/O.
"""

from __future__ import annotations

# SCHEDULE_TOPIC (message/system_topics.py) has a queue per level; a message with
# TIMER_DELIVER_MS (message/properties.py) is parked in the timer queue, one past the levels.


def queue_of_level(level: int) -> int:
    return level - 1


def level_of_queue(queue_id: int) -> int:
    return queue_id + 1


def deliver_time_ms(store_timestamp_ms: int, level: int, levels_ms: tuple[int, ...]) -> int:
    """When a record parked at ``level`` is due."""
    return store_timestamp_ms + levels_ms[min(max(level, 1), len(levels_ms)) - 1]
