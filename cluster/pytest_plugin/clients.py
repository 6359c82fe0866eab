"""The plugin's client helpers: a push consumer that keeps what it consumed for a test to wait on,
and the factory behind the ``rocketbox_consumer`` fixture, which closes what it made."""

from __future__ import annotations

import itertools
import re
import threading

from rocketbox.cluster.client.consume_service import ConsumeStatus
from rocketbox.cluster.client.consumer import PullConsumer, PushConsumer
from rocketbox.cluster.client.message import MessageExt

DEFAULT_WAIT_S = 30.0


def group_prefix(test_name: str) -> str:
    """A group-name prefix from a test's name (groups allow only [%|a-zA-Z0-9_-]), so that tests
    sharing one cluster never share a consumer group, and its offsets, by accident."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", test_name)[:80] or "test"


class CollectingConsumer(PushConsumer):
    """A PushConsumer whose ``received`` lists, in arrival order, every message consumed
    successfully: by ``listener`` when one is given (a batch it fails comes back later, as
    usual), else at once. ``wait_for(n)`` waits for the n-th."""

    def __init__(self, group: str, listener=None, **push_consumer_options):
        super().__init__(group, **push_consumer_options)
        self.received: list[MessageExt] = []
        self._arrived = threading.Condition()
        self._listener = listener
        self.register_listener(self._consume)

    def _consume(self, messages: list[MessageExt]):
        status = self._listener(messages) if self._listener is not None else ConsumeStatus.CONSUME_SUCCESS
        if not (status is False or status == ConsumeStatus.RECONSUME_LATER):   # the consume service's rule
            with self._arrived:
                self.received.extend(messages)
                self._arrived.notify_all()
        return status

    def wait_for(self, count: int, timeout_s: float = DEFAULT_WAIT_S) -> list[MessageExt]:
        """The messages received once there are at least ``count``; TimeoutError saying how many
        came when they do not within ``timeout_s``."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.received) >= count, timeout_s):
                raise TimeoutError(f"consumer group {self.group}: {len(self.received)} of {count} messages "
                                   f"arrived within {timeout_s} s")
            return list(self.received)


class ConsumerFactory:
    """``factory(topic)``: a started CollectingConsumer of a group of its own subscribed to
    ``topic`` (created with ``queues`` queues when the NameServers do not route it yet);
    ``factory.pull()``: a PullConsumer. ``close()`` shuts them down."""

    def __init__(self, cluster, prefix: str):
        self.cluster = cluster
        self.prefix = prefix
        self._numbers = itertools.count(1)
        self._made: list = []

    def next_group(self) -> str:
        return f"{self.prefix}-{next(self._numbers)}"

    def __call__(self, topic: str, expression="*", *, group: str | None = None, listener=None, queues: int = 4,
                 **push_consumer_options) -> CollectingConsumer:
        self.cluster.ensure_topic(topic, queues)
        push_consumer_options.setdefault("config", self.cluster.client_config())
        consumer = CollectingConsumer(group or self.next_group(), listener, **push_consumer_options)
        self._made.append(consumer)
        consumer.subscribe(topic, expression)
        # start() heartbeats and takes its queues before it returns, so a message sent after this
        # call is this consumer's. A new group starts at a queue's first message while the queue
        # still holds it (RocketMQ's brokers answer so), else at its end.
        consumer.start()
        return consumer

    def pull(self, group: str | None = None) -> PullConsumer:
        consumer = PullConsumer(group or self.next_group(), config=self.cluster.client_config())
        self._made.append(consumer)
        return consumer

    def close(self) -> None:
        for consumer in reversed(self._made):
            consumer.shutdown()
        self._made.clear()
