"""The broker's admin requests: what mqadmin's everyday commands ask a broker.

topicStatus (GET_TOPIC_STATS_INFO 202), consumerProgress (GET_CONSUME_STATS 208),
consumerConnection (203), consumerStatus (GET_CONSUMER_RUNNING_INFO 307, relayed to the
consumer over its own connection), updateSubGroup / deleteSubGroup (200 / 207, and 201 for the whole
table), getBrokerConfig (26), brokerStatus (28, as RocketMQ's KVTable), and the tables a slave
copies (21, 43), deleteExpiredCommitLog (329), updateBrokerConfig (25, LIVE_KEYS). Answers carry RocketMQ's bodies; maps keyed by MessageQueue are written in
fastjson's dialect (``fastjson_format``), which is what mqadmin parses.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.admin_clients import relay_to_consumer
from rocketbox.cluster.broker.admin_store import offset_wrapper
from rocketbox.cluster.broker.subscription_groups import SubscriptionGroupConfig
from rocketbox.cluster.config_file import BROKER_TABLE, broker_settings, read_settings
from rocketbox.cluster.fastjson_format import dumps as fastjson_dumps, message_queue_key
from rocketbox.cluster.live_settings import read_live, with_values, write_live
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (ProtocolError, ResponseCode, answers_refusals, field_bool, field_str,
                                        json_body, require_name, to_json_bytes)
from rocketbox.cluster.rocketmq_defaults import broker_config_answer
from rocketbox.cluster.rocketmq_keys import parse_properties, properties_text
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# What updateBrokerConfig may change while the broker runs: settings read where they are used (the
# retention keys by the allocate worker, which follows control.config_version). Others need a restart.
LIVE_KEYS = frozenset({"autoCreateTopicEnable", "enablePropertyFilter", "slaveReadEnable", "transactionTimeOut",
                       "transactionCheckMax", "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio",
                       "cleanResourceInterval", "deleteFileBatchMax", "deleteCommitLogFilesInterval",
                       "recallMessageEnable"})
# How long a consumer gets to answer GET_CONSUMER_RUNNING_INFO: under an admin's usual 5 s, so
# the admin hears why rather than timing out itself (expiry is checked once a second).
RUNNING_INFO_TIMEOUT_S = 3.0


class AdminProcessor:
    def __init__(self, ctx: BrokerContext, group_gets, started_ms: int):
        self.cfg = ctx.cfg
        # call_peer(peer, command, on_answer, timeout_s): a request to a connected client (doors.py).
        self.call_peer = ctx.call_peer
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        self.clients = ctx.clients
        self.groups = ctx.groups
        # (topic, group) -> messages served over the last minute, hour, day (stats.KeyedStats): consumeTps.
        self.group_gets = group_gets
        self.started_ms = started_ms

    # ------------------------------------------------------------ topics and groups' progress

    @answers_refusals
    def on_topic_stats(self, request: Command, reply=None) -> Command:
        """TopicStatsTable: each queue's min and max offset and when its last message was stored."""
        topic = field_str(request, "topic")
        cfg = self.topics.get(topic)
        if cfg is None:
            raise ProtocolError(f"topic[{topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        table = {}
        # RocketMQ counts write queues; a topic shrunk for reading keeps its readers' queues here too.
        for queue_id in range(max(cfg.writeQueueNums, cfg.readQueueNums)):
            max_offset = self.store.max_offset(topic, queue_id)
            last = self.store.store_timestamp_at(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            table[message_queue_key(topic, self.cfg.broker_name, queue_id)] = {
                "lastUpdateTimestamp": last, "maxOffset": max_offset,
                "minOffset": self.store.min_offset(topic, queue_id)}
        return request.response(ResponseCode.SUCCESS, body=fastjson_dumps({"offsetTable": table}).encode())

    @answers_refusals
    def on_consume_stats(self, request: Command, reply=None) -> Command:
        """ConsumeStats of a group on one topic (or every topic it has offsets on): per queue the
        broker's max offset, the group's committed offset and when the last consumed message was
        stored; and the group's consume TPS (messages this broker served it, over a minute)."""
        group = field_str(request, "consumerGroup")
        topic = request.fields.get("topic") or ""
        topics = [topic] if topic else self.offsets.topics_of(group)
        table = {}
        tps = 0.0
        for name in topics:
            cfg = self.topics.get(name)
            if cfg is None:
                continue
            tps += self.group_gets.minute_tps((name, group))
            for queue_id in range(cfg.readQueueNums):
                table[message_queue_key(name, self.cfg.broker_name, queue_id)] = offset_wrapper(
                    self.store, self.offsets, group, name, queue_id)
        body = {"consumeTps": round(tps, 2), "offsetTable": table}
        return request.response(ResponseCode.SUCCESS, body=fastjson_dumps(body).encode())

    @answers_refusals
    def on_consumer_connection_list(self, request: Command, reply=None) -> Command:
        group = field_str(request, "consumerGroup")
        table = self.clients.connection_table(group)
        if table is None:   # RocketMQ's answer and wording
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE, remark=f"the consumer group[{group}] not online")
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(table))

    @answers_refusals
    def on_query_topic_consume_by_who(self, request: Command, reply=None) -> Command:
        """RocketMQ's GroupList: the groups with an offset on ``topic`` and the online ones subscribing to it."""
        topic = field_str(request, "topic")
        groups = set(self.offsets.groups_of(topic))
        groups.update(group for group, members in self.clients.groups.items()
                      if any(topic in member.subscriptions for member in members.values()))
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"groupList": sorted(groups)}))

    @answers_refusals
    def on_consumer_running_info(self, request: Command, reply) -> None:
        """mqadmin consumerStatus: asks the consumer itself, over its own connection, for its
        ConsumerRunningInfo, and answers with the consumer's answer as it came."""
        fields = {"consumerGroup": field_str(request, "consumerGroup"), "clientId": field_str(request, "clientId"),
                  "jstackEnable": request.fields.get("jstackEnable", "false")}
        relay_to_consumer(self.clients, self.call_peer, request, reply, fields, b"", RUNNING_INFO_TIMEOUT_S)
        return None

    # ------------------------------------------------------------ subscription groups

    @answers_refusals
    def on_update_subscription_group(self, request: Command, reply=None) -> Command:
        try:
            cfg = SubscriptionGroupConfig.from_json(json_body(request))
        except ValueError as exc:
            raise ProtocolError(f"not a SubscriptionGroupConfig: {exc}") from None
        require_name("group", cfg.groupName)
        if self.cfg.is_slave:
            raise ProtocolError(f"broker {self.cfg.broker_name} id {self.cfg.broker_id} is a slave: "
                                f"update the subscription group on its master", ResponseCode.NO_PERMISSION)
        self.groups.upsert(cfg)
        _limited.info("group-set", "subscription group %s set: %s", cfg.groupName, cfg)
        return request.response(ResponseCode.SUCCESS)

    def on_all_subscription_groups(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(self.groups.to_json()))

    @answers_refusals
    def on_delete_subscription_group(self, request: Command, reply=None) -> Command:
        group = field_str(request, "groupName")
        if self.cfg.is_slave:
            raise ProtocolError(f"broker {self.cfg.broker_name} id {self.cfg.broker_id} is a slave: "
                                f"delete the subscription group on its master", ResponseCode.NO_PERMISSION)
        existed = self.groups.delete(group)
        # RocketMQ 4's header names it removeOffset (deleteSubGroup -r true), RocketMQ 5's cleanOffset.
        if field_bool(request, "cleanOffset") or field_bool(request, "removeOffset"):
            self.offsets.drop_group(group)
        _limited.info("group-deleted", "subscription group %s deleted (%s)", group,
                      "it existed" if existed else "it did not exist")
        return request.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------ configuration and copies

    def on_broker_config(self, request: Command, reply=None) -> Command:
        """mqadmin getBrokerConfig: ``key=value`` lines, every setting under its key (RocketMQ's where
        RocketMQ has it) and Apache's other keys (``rocketmq_defaults``); ``version`` is the config's
        DataVersion (it changes only with the process: settings are fixed while it runs)."""
        version = to_json_bytes({"counter": 0, "timestamp": self.started_ms}).decode()
        settings = broker_config_answer(self.cfg)
        return request.response(ResponseCode.SUCCESS, {"version": version}, body=properties_text(settings).encode())

    @answers_refusals
    def on_update_broker_config(self, request: Command, reply=None) -> Command:
        """mqadmin updateBrokerConfig: ``key=value`` lines of LIVE_KEYS. Kept in the store
        (``live_settings.py``) for the group's other processes and every later boot."""
        props = parse_properties(request.body.decode("utf-8", "replace"))
        if not props:
            raise ProtocolError("no key=value line in the body", ResponseCode.SYSTEM_ERROR)
        fixed = sorted(set(props) - LIVE_KEYS)
        if fixed:
            raise ProtocolError(f"{', '.join(fixed)} cannot change while the broker runs (set it in broker.conf "
                                f"and restart); live: {', '.join(sorted(LIVE_KEYS))}", ResponseCode.SYSTEM_ERROR)
        try:
            values = read_settings(props, BROKER_TABLE).values
            with_values(self.cfg, values).validate()
        except ValueError as exc:
            raise ProtocolError(f"updateBrokerConfig refused: {exc}", ResponseCode.SYSTEM_ERROR) from None
        store_dir = self.cfg.store.store_dir
        write_live(store_dir, {**read_live(store_dir), **values})
        for path, value in values.items():
            # Frozen against accidental change; this is the one deliberate one: every part of the
            # broker holds this same object and reads these fields where it uses them.
            holder = self.cfg.store if path.startswith("store.") else self.cfg
            object.__setattr__(holder, path.rsplit(".", 1)[-1], value)
        self.topics.auto_create_enabled = self.cfg.auto_create_topic_enabled
        control = self.store.control
        control.config_version = control.config_version + 1
        _limited.info("config-updated", "updateBrokerConfig: %s",
                      ", ".join(f"{k}={v}" for k, v in sorted(props.items())))
        return request.response(ResponseCode.SUCCESS)

    def on_delete_expired_commitlog(self, request: Command, reply=None) -> Command:
        """Count the request where the retention worker looks (``shm/retention.py``); it deletes the
        expired segments on its next turn. RocketMQ answers at once too, before any file goes."""
        control = self.store.control
        control.delete_requests = control.delete_requests + 1
        return request.response(ResponseCode.SUCCESS)

    def on_all_topic_config(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"topicConfigTable": self.topics.table()}))

    def on_all_consumer_offset(self, request: Command, reply=None) -> Command:
        table = {key: {str(q): o for q, o in queues.items()} for key, queues in self.offsets.table.items()}
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"offsetTable": table}))
