"""Queue locks for orderly consumers: LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42).

RocketMQ's RebalanceLockManager (rocketmq-protocol.md §5.6): per consumer group, each
message queue (topic, broker name, queue id) is held by at most one client id. A lock
request names a set of queues and is answered with the subset the caller now holds: a
queue nobody holds, one the caller already holds (renewed), or one whose holder has not
renewed for ``max_live_ms`` (RocketMQ's ``rocketmq.broker.rebalance.lockMaxLiveTime``,
60 s) is granted; one held by another live client is not. Unlock frees only the caller's
own locks. A client that unregisters or is expired from the client registry loses its
locks at once. The broker's event loop is single-threaded: no locking here.

Bodies are RocketMQ's JSON: LockBatchRequestBody ``{"consumerGroup", "clientId", "mqSet":
[{"topic", "brokerName", "queueId"}]}``, LockBatchResponseBody ``{"lockOKMQSet": [...]}``,
UnlockBatchRequestBody like the lock request.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from rocketbox.cluster.clock import SYSTEM_CLOCK
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, json_body, require_name, to_json_bytes
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

QueueKey = tuple[str, str, int]  # (topic, broker name, queue id)


class RebalanceLockManager:
    def __init__(self, max_live_ms: int, clock: Callable[[], int] = SYSTEM_CLOCK.now_ms):
        self.max_live_ms = max_live_ms
        self.clock = clock
        # group -> queue -> (client id, last lock or renewal in ms)
        self.table: dict[str, dict[QueueKey, tuple[str, int]]] = {}

    def _expired(self, last_ms: int, now_ms: int) -> bool:
        return now_ms - last_ms > self.max_live_ms

    def try_lock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> set[QueueKey]:
        """Lock or renew each queue for ``client_id``; the queues it holds afterwards."""
        now = self.clock()
        locks = self.table.setdefault(group, {})
        held = set()
        for queue in queues:
            entry = locks.get(queue)
            if entry is not None and entry[0] != client_id and not self._expired(entry[1], now):
                continue
            if entry is not None and entry[0] != client_id:
                _limited.info("lock-taken-over", "lock of %s in group %s expired for %s; now %s's", queue, group,
                              entry[0], client_id)
            locks[queue] = (client_id, now)
            held.add(queue)
        return held

    def unlock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        locks = self.table.get(group, {})
        for queue in queues:
            entry = locks.get(queue)
            if entry is not None and entry[0] == client_id:
                del locks[queue]
        if not locks:
            self.table.pop(group, None)

    def release_client(self, client_id: str, group: str | None = None) -> int:
        """Drop every lock ``client_id`` holds (in ``group``, or in any); how many."""
        released = 0
        for name in [group] if group else list(self.table):
            locks = self.table.get(name, {})
            for queue in [q for q, (holder, _) in locks.items() if holder == client_id]:
                del locks[queue]
                released += 1
            if not locks:
                self.table.pop(name, None)
        return released

    def holder(self, group: str, queue: QueueKey) -> str | None:
        """The client that holds ``queue`` now (an expired lock is nobody's)."""
        entry = self.table.get(group, {}).get(queue)
        if entry is None or self._expired(entry[1], self.clock()):
            return None
        return entry[0]


def queue_key(item: dict) -> QueueKey:
    return str(item["topic"]), str(item["brokerName"]), int(item["queueId"])


def queue_json(queue: QueueKey) -> dict:
    return {"topic": queue[0], "brokerName": queue[1], "queueId": queue[2]}


def _lock_request(request: Command) -> tuple[str, str, list[QueueKey]]:
    body = json_body(request)
    group = require_name("group", str(body.get("consumerGroup", "")))
    client_id = str(body.get("clientId", ""))
    if not client_id:
        raise ProtocolError("the body has no clientId")
    return group, client_id, [queue_key(item) for item in body.get("mqSet") or []]


class LockProcessor:
    """The broker's two handlers over its RebalanceLockManager."""

    def __init__(self, max_live_ms: int, clock: Callable[[], int] = SYSTEM_CLOCK.now_ms):
        self.manager = RebalanceLockManager(max_live_ms, clock)

    @answers_refusals
    def on_lock_batch(self, request: Command, reply=None) -> Command:
        group, client_id, queues = _lock_request(request)
        held = self.manager.try_lock_batch(group, queues, client_id)
        body = {"lockOKMQSet": [queue_json(q) for q in sorted(held)]}
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(body))

    @answers_refusals
    def on_unlock_batch(self, request: Command, reply=None) -> Command:
        group, client_id, queues = _lock_request(request)
        self.manager.unlock_batch(group, queues, client_id)
        return request.response(ResponseCode.SUCCESS)

    def client_gone(self, client_id: str, group: str | None = None) -> None:
        released = self.manager.release_client(client_id, group)
        if released:
            _limited.info("locks-released", "released %d queue locks of %s", released, client_id)
