"""A pop's receipt handle: the string a pop consumer gets with each message and gives back to
ack it or change its invisible time (RocketMQ 5's ReceiptHandle; the gRPC `receipt_handle`).

The broker makes it; the proxy reads only where to send it (``broker_name``) and whether it
expired, so an expired handle is refused without a round trip. Pure: no I/O.

Layout, fields separated by one space (names have none: ``config.name_problem``):

    v1 <ck_offset> <pop_time_ms> <invisible_ms> <retry> <queue_id> <queue_offset> <commitlog_offset> <broker_name>

- ``ck_offset``: the revive queue offset of the checkpoint record the pop wrote (which pop);
- ``retry``: 1 when the message was popped from the group's pop retry topic, else 0;
- ``queue_id``/``queue_offset``: where the message sits in the queue it was popped from;
- ``commitlog_offset``: its record (a dead-letter forward reads it there).
"""

from __future__ import annotations

from typing import NamedTuple

VERSION = "v1"
_FIELDS = 9


class InvalidReceiptHandle(ValueError):
    """Not a handle this broker made: wrong shape or numbers."""


class ReceiptHandle(NamedTuple):   # one an acked message: a tuple builds in a fraction of a frozen dataclass's time
    ck_offset: int
    pop_time_ms: int
    invisible_ms: int
    retry: bool
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    broker_name: str

    @property
    def next_visible_ms(self) -> int:
        return self.pop_time_ms + self.invisible_ms

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.next_visible_ms

    def encode(self) -> str:
        return " ".join((VERSION, str(self.ck_offset), str(self.pop_time_ms), str(self.invisible_ms),
                         "1" if self.retry else "0", str(self.queue_id), str(self.queue_offset),
                         str(self.commitlog_offset), self.broker_name))


def decode(text: str) -> ReceiptHandle:
    parts = text.split(" ") if isinstance(text, str) else []
    if len(parts) != _FIELDS or parts[0] != VERSION:
        raise InvalidReceiptHandle(f"not a receipt handle: {str(text)[:80]!r}")
    try:
        numbers = [int(p) for p in parts[1:8]]
    except ValueError:
        raise InvalidReceiptHandle(f"a receipt handle's numbers are not integers: {text[:80]!r}") from None
    ck, pop_time, invisible, retry, queue_id, queue_offset, phys = numbers
    if min(numbers) < 0 or retry > 1 or not parts[8]:
        raise InvalidReceiptHandle(f"a receipt handle's fields are out of range: {text[:80]!r}")
    return ReceiptHandle(ck, pop_time, invisible, retry == 1, queue_id, queue_offset, phys, parts[8])
