"""What a push consumer holds of one assigned queue (RocketMQ's ProcessQueue)."""

from __future__ import annotations

import threading

from rocketbox.cluster.client.message import MessageExt, MessageQueue


class ProcessQueue:
    """One assigned queue: where to pull next and which pulled batches are still being consumed.

    Tracked per consume batch (keyed by its first queue offset), not per message: the
    commit point is the first offset of the oldest unfinished batch.
    """

    def __init__(self, mq: MessageQueue, next_offset: int):
        self.mq = mq
        self.next_offset = next_offset
        self.in_flight: dict[int, int] = {}  # first queue offset of a batch -> its message count
        self.lock = threading.Lock()
        self.dropped = False
        self.last_committed = next_offset
        # The master endpoint that took last_committed: a different master (failover) gets it again.
        self.committed_to: str | None = None
        self.commit_sent_s = 0.0   # monotonic time the master last took this queue's commit point
        self.cached_count = 0
        self.cached_bytes = 0  # bodies of the cached messages (RocketMQ's ProcessQueue.msgSize)
        self.pull_in_flight = False  # at most one pull per queue, or offsets would interleave
        self.flow_paused = False  # held back by the cached messages or bytes cap until consumption drains

    def add(self, messages: list[MessageExt]) -> None:
        with self.lock:
            self.in_flight[messages[0].queue_offset] = len(messages)
            self.cached_count += len(messages)
            self.cached_bytes += sum(len(m.body) for m in messages)

    def done(self, messages: list[MessageExt]) -> None:
        with self.lock:
            if self.in_flight.pop(messages[0].queue_offset, None) is not None:
                self.cached_count -= len(messages)
                self.cached_bytes -= sum(len(m.body) for m in messages)

    def commit_point(self) -> int:
        with self.lock:
            return min(self.in_flight) if self.in_flight else self.next_offset

    def cached(self) -> int:
        return self.cached_count
