"""GET_BROKER_METRICS: every number the cluster's metrics exporter publishes about this broker, in
one answer (JSON), read at scrape time.

The exporter (``cluster/metrics/``, its own process) asks each broker once per scrape; nothing
here runs between scrapes. Counters the broker keeps as it serves (``meters.py``, the processors'
own tables) are copied out; gauges are computed now: consumer lag, inflight and ready messages
per group and topic from committed offsets, the offsets pulls reached and the queues' max offsets
(RocketMQ's ConsumerLagCalculator), and the store's cursors in the control block, which the flush
and reput workers publish (``flush behind = write_pos - flushed_pos``, ``dispatch behind =
write_pos - dispatched_pos``), with every process's heartbeat.
"""

from __future__ import annotations

import shutil

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.meters import PROTOCOL_NATIVE, PROTOCOL_OF_DOOR, RpcLatency
from rocketbox.cluster.config import METRICS_PROM
from rocketbox.cluster.protocol import ResponseCode, to_json_bytes
from rocketbox.cluster.remoting_format import LANGUAGES
from rocketbox.cluster.remoting_transport import TCP_PEER_PREFIX
from rocketbox.cluster.shm.control_format import ROLES
from rocketbox.cluster.wire_format import DOOR_REMOTING, Command


class BrokerMetrics:
    def __init__(self, ctx: BrokerContext, sender, puller, send_back, transactions):
        self.cfg = cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        self.groups = ctx.groups
        self.clients = ctx.clients
        self.sender = sender
        self.puller = puller
        self.send_back = send_back
        self.transactions = transactions
        self.clock = ctx.clock
        # Requests are timed (rocketmq_rpc_latency) only while metrics are exported (metricsExporterType).
        self.rpc_latency = RpcLatency() if cfg.metrics_exporter_type == METRICS_PROM else None
        # Refusals of access control per door and kind (acl/guard.py sets it when access control is on).
        self.acl_refusals = lambda: []

    def timed(self, handlers: dict) -> dict:
        """The broker's handler table, every handler timed while metrics are exported."""
        return self.rpc_latency.timed(handlers) if self.rpc_latency is not None else handlers

    def on_metrics(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(self.snapshot()))

    def snapshot(self) -> dict:
        cfg = self.cfg
        control = self.store.control
        now_ms = self.clock.now_ms()
        return {
            "cluster": cfg.cluster_name, "brokerName": cfg.broker_name, "brokerId": cfg.broker_id,
            "address": cfg.address, "nowMs": now_ms,
            "messagesIn": self.sender.traffic_in.snapshot(),
            "messagesOut": [{"topic": topic, "group": group, "messages": messages,
                             "bytes": self.puller.served_bytes_by_group.get((topic, group), 0)}
                            for (topic, group), messages in self.puller.served_by_group.items()],
            "lag": self._lag(now_ms),
            "producers": self._producer_connections(),
            "consumers": self._consumer_connections(),
            "store": {"writePos": control.write_pos, "flushedPos": control.flushed_pos,
                      "dispatchedPos": control.dispatched_pos, "diskUsedBytes": self._disk_used_bytes()},
            "heartbeatsMs": {role: control.heartbeat_ms(role) for role in ROLES},
            "sentToDlq": [{"group": group, "topic": topic, "messages": count}
                          for (group, topic), count in self.send_back.dlq_by_group.items()],
            "commits": _topic_rows(self.transactions.committed_by_topic),
            "rollbacks": _topic_rows(self.transactions.rolled_back_by_topic),
            "halfMessages": _topic_rows(self.transactions.open_halves_by_topic()),
            "rpcLatency": self.rpc_latency.snapshot() if self.rpc_latency is not None else [],
            "topics": len(self.topics.topics), "consumerGroups": len(self.groups.table()),
            "aclRefusals": self.acl_refusals(),
        }

    def _lag(self, now_ms: int) -> list[dict]:
        """Per (group, topic) with committed offsets: lag (max - committed), inflight (pulled -
        committed), ready (max - pulled) and how long the oldest unconsumed message has waited."""
        rows = []
        pulled_to = self.puller.pulled_to
        for key, queues in self.offsets.table.items():
            topic, _, group = key.rpartition("@")
            if self.topics.get(topic) is None:
                continue
            lag = inflight = ready = 0
            oldest_ms = 0
            for queue_id, committed in queues.items():
                max_offset = self.store.max_offset(topic, queue_id)
                behind = max(max_offset - committed, 0)
                pulled = max(pulled_to.get((group, topic, queue_id), committed), committed)
                lag += behind
                inflight += pulled - committed
                ready += max(max_offset - pulled, 0)
                if behind:
                    stored_ms = self.store.store_timestamp_at(topic, queue_id, committed)
                    if stored_ms and (not oldest_ms or stored_ms < oldest_ms):
                        oldest_ms = stored_ms
            rows.append({"group": group, "topic": topic, "lag": lag, "inflight": inflight, "ready": ready,
                         "lagLatencyMs": max(now_ms - oldest_ms, 0) if oldest_ms else 0})
        return rows

    def _producer_connections(self) -> list[dict]:
        counts: dict[tuple, int] = {}
        for producers in self.clients.producers.values():
            for member in producers.values():
                key = (_language_name(member.language), member.version, _protocol(member.peer))
                counts[key] = counts.get(key, 0) + 1
        return [{"language": language, "version": version, "protocol": protocol, "connections": n}
                for (language, version, protocol), n in counts.items()]

    def _consumer_connections(self) -> list[dict]:
        counts: dict[tuple, int] = {}
        for group, members in self.clients.groups.items():
            for member in members.values():
                # RocketMQ's ConsumeType.getTypeCN: PULL for CONSUME_ACTIVELY, PUSH for CONSUME_PASSIVELY.
                mode = "pull" if member.consume_type == "CONSUME_ACTIVELY" else "push"
                key = (group, _language_name(member.language), member.version, mode, _protocol(member.peer))
                counts[key] = counts.get(key, 0) + 1
        return [{"group": group, "language": language, "version": version, "consumeMode": mode,
                 "protocol": protocol, "connections": n}
                for (group, language, version, mode, protocol), n in counts.items()]

    def _disk_used_bytes(self) -> int:
        """RocketMQ's rocketmq_storage_size: the bytes in use on the disk that holds the store."""
        try:
            usage = shutil.disk_usage(self.cfg.store.store_dir)
        except OSError:
            return 0
        return usage.total - usage.free


def _protocol(peer) -> str:
    """The door a client's connection came by (a remoting TCP peer's key has its prefix)."""
    remoting = isinstance(peer, bytes) and peer.startswith(TCP_PEER_PREFIX)
    return PROTOCOL_OF_DOOR[DOOR_REMOTING] if remoting else PROTOCOL_NATIVE


def _language_name(ordinal: int) -> str:
    return (LANGUAGES[ordinal] if 0 <= ordinal < len(LANGUAGES) else "OTHER").lower()


def _topic_rows(counts: dict[str, int]) -> list[dict]:
    return [{"topic": topic, "messages": n} for topic, n in counts.items()]
