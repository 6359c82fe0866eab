"""Queue selectors for ordered sends: the same key always lands on the same queue.

``select_by_hash`` is RocketMQ's SelectMessageQueueByHash: Java ``hashCode()`` of the
key, Java remainder (negative for a negative hash), then its absolute value. A client
in Java and one here pick the same queue for the same key and queue list.
"""

from __future__ import annotations

from typing import Sequence

from cluster.client.message import MessageQueue
from cluster.shm.consumequeue_format import java_string_hash


def select_by_hash(queues: Sequence[MessageQueue], key: str) -> MessageQueue:
    if not queues:
        raise ValueError("no queue to select from")
    h = java_string_hash(key)
    remainder = abs(h) % len(queues)  # Java's % keeps the dividend's sign; abs() of it is this
    return queues[remainder]
