"""A slave fetches its master's topic configs and consumer offsets (RocketMQ's SlaveSynchronize).

Every ``slave_sync_interval_ms`` the slave's broker main asks its master
(``BrokerConfig.master_address``) for GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and replaces its own tables with the answers (persisted as the master's are), so it can serve
pulls and offset queries of every topic from its replicated store. The requests go out on the
RPC client's I/O thread; their futures are read back on the broker's loop (no locks), one round
at a time. A master that does not answer leaves the slave's tables as they were: while it is
down, consumers may commit offsets to the slave (see docs/ARCHITECTURE.md, "Replication").

Under ACL 2.0 it also asks AUTH_LIST_USER (3005) and AUTH_LIST_ACL (3010) and makes its auth.json
hold the master's users and ACLs: on one host master and slave read the same file (nothing to
write), a slave on another host keeps a copy. A master that refuses them (no ACL 2.0 there) leaves
the copy as it is; the other tables are applied all the same.
"""

from __future__ import annotations

import json
import logging

from rocketbox.cluster.acl.addresses import AclFormatError
from rocketbox.cluster.acl.auth_model import AuthError, AuthStore
from rocketbox.cluster.acl.auth_store import editing, is_auth_file, read_auth_file
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
        self.auth_file = cfg.acl_file if cfg.acl_enable and is_auth_file(cfg.acl_file) else ""

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
        if self.auth_file:
            self.pending["users"] = self.client.call_async(endpoint, Command(RequestCode.AUTH_LIST_USER, {}))
            self.pending["acls"] = self.client.call_async(endpoint, Command(RequestCode.AUTH_LIST_ACL, {}))

    def _apply(self) -> None:
        pending, self.pending = self.pending, {}
        self._apply_auth(pending.pop("users", None), pending.pop("acls", None))
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

    def _apply_auth(self, users, acls) -> None:
        if users is None or acls is None:
            return
        answers = []
        for future in (users, acls):
            exc = future.exception()
            if exc is not None or future.result().code != ResponseCode.SUCCESS:
                log.info("slave sync of ACL 2.0 from %s failed: %s", self.cfg.master_address,
                         exc or future.result().remark)
                return
            answers.append(json.loads(future.result().body or b"[]"))
        try:
            fresh = AuthStore({"users": answers[0], "acls": answers[1]})
            held = read_auth_file(self.auth_file)
            if fresh.to_json()["users"] == held.to_json()["users"] and fresh.to_json()["acls"] == held.to_json()["acls"]:
                return
            with editing(self.auth_file) as store:
                store.users, store.acls = fresh.users, fresh.acls
        except (AuthError, AclFormatError, OSError) as exc:
            log.warning("slave sync of ACL 2.0 from %s not applied: %s", self.cfg.master_address, exc)
            return
        log.info("ACL 2.0 users and ACLs copied from the master %s", self.cfg.master_address)

    def close(self) -> None:
        self.client.close()
