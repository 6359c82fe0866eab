"""Queue offset ranges for the DataSource: parsing the options and planning the ranges.

Offsets are written the way Spark's Kafka source writes them, with the broker name
where Kafka has the topic: ``{"broker-a": {"0": 23, "1": -2}}``; -2 means earliest and
-1 latest, and the strings ``earliest`` / ``latest`` mean that for every queue.
Pure: the caller supplies each queue's (min, max) bounds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

EARLIEST, LATEST = -2, -1

Bounds = dict[tuple[str, int], tuple[int, int]]   # (broker, queue id) -> (min offset, max offset)
Offsets = dict[tuple[str, int], int]              # (broker, queue id) -> offset


@dataclass(frozen=True)
class QueueRange:
    broker: str
    queue_id: int
    start: int     # first offset to read
    end: int       # exclusive

    @property
    def count(self) -> int:
        return max(0, self.end - self.start)


def parse_spec(text: str | None, default: str) -> str | dict[tuple[str, int], int]:
    """'earliest', 'latest' or a per-queue dict from an option's text; ValueError if malformed."""
    text = (text or default).strip()
    if text in ("earliest", "latest"):
        return text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"offsets must be 'earliest', 'latest' or JSON like "
                         f'{{"broker-a": {{"0": 23}}}}: {exc}') from None
    if not isinstance(data, dict):
        raise ValueError("offsets JSON must be an object of broker name -> {queue id: offset}")
    out = {}
    for broker, queues in data.items():
        if not isinstance(queues, dict):
            raise ValueError(f"offsets for broker {broker!r} must be an object of queue id -> offset")
        for queue_id, offset in queues.items():
            try:
                out[(str(broker), int(queue_id))] = int(offset)
            except (TypeError, ValueError):
                raise ValueError(f"bad offset {offset!r} for {broker}:{queue_id}") from None
    return out


def resolve(spec: str | dict, bounds: Bounds, absent: str) -> Offsets:
    """A concrete offset per known queue: -2/-1 and names resolved against the bounds, offsets
    clamped into [min, max]; queues the spec does not name take ``absent`` (earliest/latest)."""
    out = {}
    for queue, (low, high) in bounds.items():
        if isinstance(spec, str):
            wanted = EARLIEST if spec == "earliest" else LATEST
        else:
            wanted = spec.get(queue, EARLIEST if absent == "earliest" else LATEST)
        if wanted == EARLIEST:
            out[queue] = low
        elif wanted == LATEST:
            out[queue] = high
        else:
            out[queue] = min(max(wanted, low), high)
    return out


def ranges(start: Offsets, end: Offsets) -> list[QueueRange]:
    """Non-empty ranges, one per queue, in (broker, queue) order."""
    out = []
    for queue in sorted(end):
        begin = start.get(queue, 0)
        if end[queue] > begin:
            out.append(QueueRange(queue[0], queue[1], begin, end[queue]))
    return out


def capped(start: Offsets, latest: Offsets, rows_max: int) -> Offsets:
    """End offsets holding at most ``rows_max`` new rows in all, shared by the queues in
    proportion to how far behind each is (as Spark's Kafka source does); every queue
    with a backlog moves at least one row when the cap allows."""
    lag = {q: max(0, latest[q] - start.get(q, 0)) for q in latest}
    total = sum(lag.values())
    if total <= rows_max:
        return dict(latest)
    end = {q: start.get(q, 0) for q in latest}
    budget = rows_max
    for q in sorted(lag):
        if lag[q] and budget:
            take = min(lag[q], budget, max(1, lag[q] * rows_max // total))
            end[q] += take
            budget -= take
    return end


def to_json(offsets: Offsets) -> dict:
    """The streaming checkpoint form: {broker: {queue id: offset}} with string keys."""
    out: dict[str, dict[str, int]] = {}
    for (broker, queue_id), offset in sorted(offsets.items()):
        out.setdefault(broker, {})[str(queue_id)] = int(offset)
    return out


def from_json(data: dict) -> Offsets:
    return {(broker, int(queue_id)): int(offset)
            for broker, queues in data.items() for queue_id, offset in queues.items()}
