"""RocketMQ's setting texts, read into values: delay levels (messageDelayLevel), the hours of
deleteWhen, and the rule for topic and group names. Settings layer, pure; ``config.py`` re-exports
them where the settings are."""

from __future__ import annotations

import functools
import re

# RocketMQ's rule for topic and group names (TopicValidator / Validators).
NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
NAME_LENGTH_MAX = 127

# RocketMQ's messageDelayLevel: the delay of each level of a scheduled message.
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


def delete_hours(text: str) -> frozenset[int]:
    """The hours of day of RocketMQ's deleteWhen ("04", "04;16"); ValueError when one does not parse."""
    hours = set()
    for part in text.split(";"):
        part = part.strip()
        if not part.isdigit() or not 0 <= int(part) <= 23:
            raise ValueError(f"delete_when {text!r}: {part!r} is not an hour of day (00..23)")
        hours.add(int(part))
    return frozenset(hours)


@functools.lru_cache(maxsize=8192)
def name_problem(kind: str, name: str) -> str | None:
    """Why ``name`` is not a valid topic or group name, or None when it is.

    Memoized: the same few names are checked on every send and pull."""
    if not isinstance(name, str) or not name:
        return f"{kind} name is empty"
    if len(name) > NAME_LENGTH_MAX:
        return f"{kind} name is {len(name)} characters, more than {NAME_LENGTH_MAX}"
    if not NAME_PATTERN.match(name):
        return f"{kind} name {name!r} has characters outside [%|a-zA-Z0-9_-]"
    return None
