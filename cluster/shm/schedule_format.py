"""Scheduled (delayed) messages: how a delayed record is parked.

A message with property DELAY=n (1..levels) is stored in ``SCHEDULE_TOPIC_XXXX`` queue
n-1 with REAL_TOPIC and REAL_QID naming where it belongs (RocketMQ 4's scheme). Its
ConsumeQueue entry's tag field holds the delivery time (store time + the level's
delay) instead of a tag hash (SPEC §4), so the schedule service can tell from the
queue alone whether the head entry is due. The levels' delays are a setting
(``cluster.config.parse_levels``). Pure: no I/O.
"""

from __future__ import annotations

from rocketbox.cluster.message.properties import (PROPERTY_TIMER_DELAY_MS as _TIMER_DELAY_MS,
                                                  PROPERTY_TIMER_DELAY_SEC as _TIMER_DELAY_SEC,
                                                  PROPERTY_TIMER_DELIVER_MS as _TIMER_DELIVER_MS,
                                                  PROPERTY_TIMER_OUT_MS as _TIMER_OUT_MS)

# SCHEDULE_TOPIC (message/system_topics.py) has a queue per level; a message with
# TIMER_DELIVER_MS (message/properties.py) is parked in the timer queue, one past the levels.


def queue_of_level(level: int) -> int:
    return level - 1


def level_of_queue(queue_id: int) -> int:
    return queue_id + 1


def deliver_time_ms(store_timestamp_ms: int, level: int, levels_ms: tuple[int, ...]) -> int:
    """When a record parked at ``level`` is due."""
    return store_timestamp_ms + levels_ms[min(max(level, 1), len(levels_ms)) - 1]


# ---------------------------------------------------------------- timed messages (RocketMQ 5's timer)

# RocketMQ's timerPrecisionMs default: the timer's slot, to which TIMER_OUT_MS is floored.
TIMER_PRECISION_MS = 1000
# RocketMQ's timerMaxDelaySec default (3 days): a recall handle further out than this is invalid.
TIMER_MAX_DELAY_MS = 259_200 * 1000
TIMER_PROPERTIES = (_TIMER_DELIVER_MS, _TIMER_DELAY_SEC, _TIMER_DELAY_MS)


def is_timed(props: dict[str, str]) -> bool:
    """A message for the timer (a delivery time, or a delay in seconds or ms), not a delay level."""
    return any(name in props for name in TIMER_PROPERTIES)


def requested_deliver_ms(props: dict[str, str], now_ms: int) -> int:
    """When a timed message asks to be delivered, read as RocketMQ's HookUtils reads it: a delay in
    seconds first, then in ms (both from now), then the delivery time. ValueError when not an integer."""
    if _TIMER_DELAY_SEC in props:
        return now_ms + int(props[_TIMER_DELAY_SEC]) * 1000
    if _TIMER_DELAY_MS in props:
        return now_ms + int(props[_TIMER_DELAY_MS])
    return int(props[_TIMER_DELIVER_MS])


def timer_out_ms(deliver_ms: int, precision_ms: int = TIMER_PRECISION_MS) -> int:
    """TIMER_OUT_MS for a delivery time: its timer slot, as RocketMQ floors it (a time on a slot's
    edge goes one slot earlier). A recall handle carries this + 1."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def parked_due_ms(props: dict[str, str]) -> int:
    """When a parked timed record is due: its exact TIMER_DELIVER_MS, or for a delay (whose exact end
    only the send knew) its recall handle's time, TIMER_OUT_MS + 1: never while a recall may still be
    taken. KeyError or ValueError when the property is missing or no integer."""
    if _TIMER_DELIVER_MS in props and _TIMER_DELAY_SEC not in props and _TIMER_DELAY_MS not in props:
        return int(props[_TIMER_DELIVER_MS])
    return int(props[_TIMER_OUT_MS]) + 1
