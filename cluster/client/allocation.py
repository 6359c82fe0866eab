"""How a consumer group splits a topic's queues among its live members.

Every member sorts the queue list and the member list the same way and takes its
own share, so no coordination is needed (SPEC §2). Each strategy is a pure function
``(queues, members, me) -> my queues`` with the semantics of RocketMQ's
AllocateMessageQueueStrategy of the same name (``STRATEGIES`` maps those names):

- ``AVG`` (AllocateMessageQueueAveragely, the default): contiguous pages, the first
  ``len(queues) % len(members)`` members get one extra.
- ``AVG_BY_CIRCLE`` (AllocateMessageQueueAveragelyByCircle): dealt like cards, queue i
  to member ``i % len(members)``.
- ``CONSISTENT_HASH`` (AllocateMessageQueueConsistentHash): members on an MD5 hash ring,
  each with ``virtual_nodes`` points (RocketMQ's default 10); a queue goes to the first
  point at or after its own hash. A member joining or leaving moves only the queues
  that land on its points.
- ``CONFIG`` (AllocateMessageQueueByConfig): a fixed list, whatever the group looks
  like; the application makes the lists of its members disjoint.

Every strategy gives nothing to a client missing from the member list (RocketMQ logs
that as a bug and allocates nothing).
"""

from __future__ import annotations

import bisect
import hashlib
from typing import Callable, Iterable, Sequence, TypeVar

Q = TypeVar("Q")
Strategy = Callable[[Sequence[Q], Sequence[str], str], list]

CONSISTENT_HASH_VIRTUAL_NODES_DEFAULT = 10


def allocate_average(queues: Sequence[Q], members: Sequence[str], me: str) -> list[Q]:
    queues = sorted(queues)
    members = sorted(members)
    if me not in members or not queues:
        return []
    index = members.index(me)
    n_queues, n_members = len(queues), len(members)
    mod = n_queues % n_members
    if n_queues <= n_members:
        size = 1
    else:
        size = n_queues // n_members + (1 if mod > 0 and index < mod else 0)
    start = index * size if (mod > 0 and index < mod) else index * size + mod
    count = max(0, min(size, n_queues - start))
    return [queues[(start + i) % n_queues] for i in range(count)]


def allocate_average_by_circle(queues: Sequence[Q], members: Sequence[str], me: str) -> list[Q]:
    queues = sorted(queues)
    members = sorted(members)
    if me not in members:
        return []
    index = members.index(me)
    return queues[index::len(members)]


def queue_hash_key(queue) -> str:
    """What a queue is hashed by: Java's ``MessageQueue.toString()``, so a ring places queues
    as RocketMQ's does; anything else by ``str``."""
    if all(hasattr(queue, a) for a in ("topic", "broker_name", "queue_id")):
        return f"MessageQueue [topic={queue.topic}, brokerName={queue.broker_name}, queueId={queue.queue_id}]"
    return str(queue)


def ring_hash(key: str) -> int:
    """RocketMQ's ConsistentHashRouter default hash: the first 4 bytes of MD5, big-endian, unsigned."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


class HashRing:
    """Members on a hash ring, ``virtual_nodes`` points each, named ``<member>-<i>``; a
    point's hash taken twice keeps the member added last (sorted order, as a TreeMap put)."""

    def __init__(self, members: Iterable[str], virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES_DEFAULT):
        if virtual_nodes < 0:
            raise ValueError(f"virtual_nodes must be >= 0, got {virtual_nodes}")
        points: dict[int, str] = {}
        for member in sorted(members):
            for i in range(virtual_nodes):
                points[ring_hash(f"{member}-{i}")] = member
        self._hashes = sorted(points)
        self._owners = [points[h] for h in self._hashes]

    def route(self, key: str) -> str | None:
        if not self._hashes:
            return None
        i = bisect.bisect_left(self._hashes, ring_hash(key))
        return self._owners[i % len(self._owners)]


def allocate_consistent_hash(queues: Sequence[Q], members: Sequence[str], me: str,
                             virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES_DEFAULT) -> list[Q]:
    if me not in members:
        return []
    ring = HashRing(members, virtual_nodes)
    return [q for q in sorted(queues) if ring.route(queue_hash_key(q)) == me]


def consistent_hash(virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES_DEFAULT) -> Strategy:
    """The consistent-hash strategy with another number of points per member."""
    if virtual_nodes < 0:
        raise ValueError(f"virtual_nodes must be >= 0, got {virtual_nodes}")

    def allocate(queues, members, me):
        return allocate_consistent_hash(queues, members, me, virtual_nodes)
    return allocate


def by_config(configured: Iterable[Q]) -> Strategy:
    """Always ``configured`` (those of them the topic has now): RocketMQ's AllocateMessageQueueByConfig."""
    fixed = frozenset(configured)

    def allocate(queues, members, me):
        return [q for q in sorted(queues) if q in fixed] if me in members else []
    return allocate


# RocketMQ's AllocateMessageQueueStrategy.getName() of each.
STRATEGIES: dict[str, Strategy] = {
    "AVG": allocate_average,
    "AVG_BY_CIRCLE": allocate_average_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}


def strategy(allocate: str | Strategy) -> Strategy:
    """A strategy given by its RocketMQ name, or the function itself."""
    if callable(allocate):
        return allocate
    try:
        return STRATEGIES[allocate.upper()]
    except KeyError:
        raise ValueError(f"unknown allocation strategy {allocate!r}; known: {', '.join(STRATEGIES)} "
                         f"(CONFIG needs its queue list: allocation.by_config([...]))") from None
