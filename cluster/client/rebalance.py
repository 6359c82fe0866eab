"""A push consumer's rebalancing (RocketMQ's RebalanceImpl): which queues this member reads, from
the group's member list and the allocation strategy (every queue, broadcasting); queues given
away are committed and dropped, queues taken start at the offset store's point."""

from __future__ import annotations

import logging

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.consume_service import BROADCASTING
from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.client.process_queue import ProcessQueue
from rocketbox.cluster.errors import ClientError, NoRouteError
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)


class Rebalancer:
    def __init__(self, consumer):
        self.consumer = consumer

    def rebalance(self) -> None:
        c = self.consumer
        wanted: set[MessageQueue] = set()
        with c._queues_lock:
            held = set(c._queues)
        for topic in c.subscriptions:
            try:
                route = c.routes.get(topic)
            except NoRouteError:
                route = None
            if route is None:
                continue
            queues = route.subscribe_queues()
            if c.message_model == BROADCASTING:
                wanted.update(queues)  # every member reads every queue
                continue
            members = self.group_members(route)
            if c.client_id not in members:
                # The broker does not know us (it restarted, or our heartbeat is late): register
                # now, and keep this topic's queues until the member list includes us again.
                # Dropping them would hand the queues to nobody and stall them.
                log.info("consumer %s: not in group %s's member list %s; heartbeating", c.client_id,
                         c.group, members)
                c._heartbeat_all()   # the broker's join notice brings the next rebalance
                wanted.update(q for q in held if q.topic == topic)
                continue
            if members != c._members.get(topic):
                log.info("consumer %s: group %s members of %s now %s", c.client_id, c.group, topic, members)
                c._members[topic] = members
            wanted.update(c.allocate(queues, members, c.client_id))
        with c._queues_lock:
            current = set(c._queues)
        removed = current - wanted
        added = wanted - current
        if c._orderly is not None and added:
            added = c._orderly.lock(added)  # only what the broker locked for us; the rest later
        if not (removed or added):
            return
        c.rebalances += 1
        for mq in removed:
            with c._queues_lock:
                pq = c._queues.pop(mq, None)
            if pq is not None:
                pq.dropped = True
                c._commit(pq, force=True, handing_over=True)
                if c._orderly is not None:
                    c._orderly.release(pq)  # after its running batch: commit, then unlock
        for mq in sorted(added):
            try:
                pq = ProcessQueue(mq, c.offsets.start_offset(mq))
                if c.on_queue_start is not None:
                    c.on_queue_start(mq, pq.next_offset)
            except (ClientError, TransportError) as exc:
                log.warning("cannot start %s: %s", mq, exc)
                continue
            with c._queues_lock:
                c._queues[mq] = pq
            c._pull(pq)

    def group_members(self, route) -> list[str]:
        c = self.consumer
        for name in sorted(route.broker_addrs):
            endpoint = route.master_endpoint(name)
            if endpoint is None:
                continue
            try:
                return sorted(broker_api.consumer_ids(c.rpc, endpoint, c.group))
            except (ClientError, TransportError) as exc:
                log.info("member list from %s failed: %s", endpoint, exc)
        return []

    # ----------------------------------------------------------- pulling
