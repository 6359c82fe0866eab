"""Queue selectors for ordered sends: the same key always lands on the same queue.

``select_by_hash`` is RocketMQ's SelectMessageQueueByHash: Java ``hashCode()`` of the
key, Java remainder (negative for a negative hash), then its absolute value. A client
in Java and one here pick the same queue for the same key and queue list.

``hash_selector`` is the same as a MessageQueueSelector for ``Producer.send(msg,
selector=..., arg=key)``: any callable ``(queues, msg, arg) -> MessageQueue`` will do there.
An int key hashes as a Java Integer (its own value), anything else as its string.
"""

from __future__ import annotations

from typing import Sequence

from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.message.tags import java_string_hash


def select_by_hash(queues: Sequence[MessageQueue], key: str | int) -> MessageQueue:
    if not queues:
        raise ValueError("no queue to select from")
    if isinstance(key, int) and -2**31 <= key < 2**31:
        h = key
    else:
        h = java_string_hash(str(key))
    remainder = abs(h) % len(queues)  # Java's % keeps the dividend's sign; abs() of it is this
    return queues[remainder]


def hash_selector(queues: Sequence[MessageQueue], msg, arg) -> MessageQueue:
    """RocketMQ's SelectMessageQueueByHash as a selector: the queue of ``arg``'s hash."""
    return select_by_hash(queues, arg)
