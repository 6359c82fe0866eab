"""A slave fetches its master's topic configs and consumer offsets (RocketMQ's SlaveSynchronize).

Every ``slave_sync_interval_ms`` the slave's broker main asks its master
(``BrokerConfig.master_address``) for GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and replaces its own tables with the answers (persisted as the master's are), so it can serve
pulls and offset queries of every topic from its replicated store. The requests go out on the
RPC client's I/O thread; their futures are read back on the broker's loop (no locks), one round
at a time. A master that does not answer leaves the slave's tables as they were: while it is
down, consumers may commit offsets to the slave (see docs/ARCHITECTURE.md, "Replication").
"""

from __future__ import annotations

import json
import logging

from rocketbox.cluster.broker.topics import TopicConfig
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient

log = logging.getLogger(__name__)

TICK_S = 0.05


class SlaveSynchronize:
    def __init__(self, cfg, topics, offsets, groups, clock):
        self.cfg = cfg
        self.topics = topics
        self.offsets = offsets
        self.groups = groups
        self.clock = clock
        self.client = RpcClient(default_timeout_ms=3000)
        self.pending: dict[str, object] = {}
        self._next_s = 0.0
        self.synced = 0          # rounds applied

    def serve(self, loop) -> None:
        if self.cfg.master_address:
            loop.call_every(TICK_S, self.tick)

    def tick(self) -> None:
        if self.pending:
            if not all(f.done() for f in self.pending.values()):
                return
            self._apply()
        now = self.clock.monotonic()   # the broker's clock: a test's ManualClock paces the rounds
        if now < self._next_s:
            return
        self._next_s = now + self.cfg.slave_sync_interval_ms / 1000
        endpoint = f"tcp://{self.cfg.master_address}"
        self.pending = {
            "topics": self.client.call_async(endpoint, Command(RequestCode.GET_ALL_TOPIC_CONFIG, {})),
            "offsets": self.client.call_async(endpoint, Command(RequestCode.GET_ALL_CONSUMER_OFFSET, {})),
            "groups": self.client.call_async(endpoint, Command(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}))}

    def _apply(self) -> None:
        pending, self.pending = self.pending, {}
        answers = {}
        for kind, future in pending.items():
            exc = future.exception()
            if exc is not None or future.result().code != ResponseCode.SUCCESS:
                log.info("slave sync of %s from %s failed: %s", kind, self.cfg.master_address,
                         exc or future.result().remark)
                return
            answers[kind] = json.loads(future.result().body or b"{}")
        self.apply_topics(answers["topics"].get("topicConfigTable", {}))
        self.apply_offsets(answers["offsets"].get("offsetTable", {}))
        self.groups.replace(answers["groups"].get("subscriptionGroupTable") or {})
        self.synced += 1

    def apply_topics(self, table: dict) -> None:
        topics = self.topics
        fresh = {name: TopicConfig.from_json(cfg) for name, cfg in table.items()}
        if fresh != topics.topics:
            topics.topics = fresh
            topics.persist()

    def apply_offsets(self, table: dict) -> None:
        offsets = self.offsets
        for key, queues in table.items():
            topic, _, group = key.partition("@")
            for queue_id, offset in queues.items():
                offsets.commit(group, topic, int(queue_id), int(offset))

    def close(self) -> None:
        self.client.close()
