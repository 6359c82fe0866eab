"""How a consumer group splits a topic's queues among its live members.

Every member sorts the queue list and the member list the same way and takes its
own share, so no coordination is needed (SPEC §2). Average allocation is
RocketMQ's AllocateMessageQueueAveragely: contiguous pages, the first
``len(queues) % len(members)`` members get one extra.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

Q = TypeVar("Q")


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
