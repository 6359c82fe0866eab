"""Where a push consumer keeps its place, in RocketMQ's two kinds: a clustering group's offsets
live on the brokers (RemoteBrokerOffsetStore), a broadcasting member's in a local file of its
own (LocalFileOffsetStore). The consumer holds one and never asks which.

Both answer the same four questions: where a newly assigned queue starts, how a queue's
commit point is recorded, how an offset reset lands, and what to do at each commit interval
and at shutdown.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.offset_store import LocalOffsetStore
from rocketbox.cluster.client.process_queue import ProcessQueue
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.protocol import MASTER_ID, MessageQueue
from rocketbox.cluster.zmq_transport import TransportError

# An unchanged commit point is sent again this often (RocketMQ's persistConsumerOffsetInterval, 5 s,
# sends every queue's each time): a broker that lost the last commits (a power cut of its host
# reverts unsynced offsets) learns them back, or the group's progress would stall there.
RESEND_UNCHANGED_S = 5.0

log = logging.getLogger(__name__)


class RemoteBrokerOffsets:
    """Clustering: the group's offsets on the broker that holds each queue, with the failover
    rules (a slave's acceptance is not final; a new master is told the point again)."""

    def __init__(self, client, group: str, on_commit: Callable[[MessageQueue, int], None] | None):
        self.client = client  # the consumer: rpc, routes and which broker of a group to ask
        self.group = group
        self.on_commit = on_commit

    def start_offset(self, mq: MessageQueue) -> int:
        rpc, endpoint = self.client.rpc, self.client._endpoint(mq)
        offset = broker_api.query_consumer_offset(rpc, endpoint, self.group, mq)
        if offset is None:  # CONSUME_FROM_LAST_OFFSET for a group new to a queue with history
            offset = broker_api.max_offset(rpc, endpoint, mq)
            # Recorded at once: a member that takes this queue over before our first commit
            # would otherwise start from a later maximum and skip what arrived in between.
            broker_api.update_consumer_offset(rpc, endpoint, self.group, mq, offset)
            self.committed(mq, offset)
        return offset

    def committed(self, mq: MessageQueue, offset: int) -> None:
        if self.on_commit is not None:
            try:
                self.on_commit(mq, offset)
            except Exception:
                log.exception("on_commit callback failed for %s", mq)

    def commit(self, pq: ProcessQueue, force: bool = False, handing_over: bool = False) -> None:
        """Send the queue's commit point to the broker.

        ``handing_over``: the queue was just given to another member, which may have committed
        further already; then never move the broker's offset back (that would redeliver).
        """
        point = pq.commit_point()
        rpc = self.client.rpc
        broker_id = MASTER_ID
        try:
            endpoint, broker_id = self.client._commit_endpoint(pq.mq)
            # A new master (failover) may lack the last commits the old one took (a slave copies
            # offsets every second): it gets the commit point again even if it has not moved.
            new_master = broker_id == MASTER_ID and pq.committed_to not in (None, endpoint)
            fresh = time.monotonic() - pq.commit_sent_s < RESEND_UNCHANGED_S
            if point == pq.last_committed and not force and not new_master and fresh:
                return
            if handing_over:
                current = broker_api.query_consumer_offset(rpc, endpoint, self.group, pq.mq)
                if current is not None and current > point:
                    return
            taken_by = broker_api.update_consumer_offset(rpc, endpoint, self.group, pq.mq, point)
            if broker_id != MASTER_ID or taken_by != MASTER_ID:
                # The slave keeps it while the master is down; not final until the master has it,
                # so every commit interval sends it again (to the master once it answers pulls).
                # Sent to the route's master but taken by a slave: the group failed over and this
                # route is stale.
                if taken_by != MASTER_ID:
                    self.client.routes.suspect(pq.mq.broker_name)
                return
            pq.last_committed = point
            pq.committed_to = endpoint
            pq.commit_sent_s = time.monotonic()
            self.committed(pq.mq, point)
        except TransportError as exc:
            log.warning("offset commit for %s failed: %s", pq.mq, exc)
            if broker_id == MASTER_ID:   # the next commits (and pulls) go to a slave for a while
                self.client._pulled(pq.mq, MASTER_ID)
        except ClientError as exc:
            log.warning("offset commit for %s failed: %s", pq.mq, exc)

    def reset(self, mq: MessageQueue, offset: int, held: bool) -> None:
        """An offset reset the broker already recorded; a queue this member held is told again
        from here, so no commit of the old position can land after it."""
        if not held:
            return
        try:
            broker_api.update_consumer_offset(self.client.rpc, self.client._endpoint(mq), self.group, mq, offset)
            self.committed(mq, offset)
        except (ClientError, TransportError) as exc:
            log.warning("offset reset commit for %s failed (the broker set it already): %s", mq, exc)

    def persist(self) -> None:
        """Nothing to write here: every commit already went to a broker."""

    def close(self) -> None:
        pass


class LocalFileOffsets:
    """Broadcasting: this member's own offsets, in its local file (``offset_store.py``)."""

    def __init__(self, client, path: str):
        self.client = client
        self.store = LocalOffsetStore(path).open()

    def start_offset(self, mq: MessageQueue) -> int:
        offset = self.store.read(mq)
        if offset is None:  # CONSUME_FROM_LAST_OFFSET, for this member alone
            offset = broker_api.max_offset(self.client.rpc, self.client._endpoint(mq), mq)
            self.store.update(mq, offset)
        return offset

    def commit(self, pq: ProcessQueue, force: bool = False, handing_over: bool = False) -> None:
        point = pq.commit_point()
        if point != pq.last_committed or force:
            self.store.update(pq.mq, point)
            pq.last_committed = point

    def reset(self, mq: MessageQueue, offset: int, held: bool) -> None:
        self.store.update(mq, offset)

    def persist(self) -> None:
        self.store.persist()

    def close(self) -> None:
        self.store.close()
