"""mqadmin's requests about a broker's queues, offsets and store, with RocketMQ's bodies.

| code | verb | answer |
| --- | --- | --- |
| GET_BROKER_CONSUME_STATS 317 | brokerConsumeStats | ConsumeStatsList: every subscription group's ConsumeStats per topic it has offsets on (``isOrder``: orderly topics only), and the total diff |
| QUERY_CONSUME_QUEUE 321 | queryCq | QueryConsumeQueueResponseBody: min/max index, ``count`` entries from ``index`` (CommitLog offset, size, tag hash), a group's subscription |
| CLEAN_EXPIRED_CONSUMEQUEUE 306 | cleanExpiredCQ | ConsumeQueue files whose every entry lies below the CommitLog's floor, deleted now (retention deletes them at each look too) |
| CLONE_GROUP_OFFSET 314 | cloneGroupOffset | the source group's committed offsets of a topic (or of all its topics) copied to the destination group |
| GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305 | exportMetadata, exportMetrics | TopicList of the topics the broker keeps for itself |
| GET_ALL_DELAY_OFFSET 45 | | each delay level's delivery progress (RocketMQ's delayOffset.json) |
| QUERY_CONSUME_TIME_SPAN 303 | | per queue: store time of the oldest, newest and last consumed message, and how late the next one is |
| QUERY_CORRECTION_OFFSET 308 | | per queue the lowest offset of the topic's groups but ``filterGroups``, MAX where ``compareGroup`` is behind it |
| RESUME_CHECK_HALF_MESSAGE 323 | | an open half message written again with its check count at 0 (a resolved one is refused: nothing is left to check) |
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.admin_clients import record_of_msg_id
from rocketbox.cluster.broker.runtime_kv import schedule_offsets
from rocketbox.cluster.broker.transaction import HALF_TOPIC, PROPERTY_CHECK_TIMES
from rocketbox.cluster.fastjson_format import dumps as fastjson_dumps, message_queue_key
from rocketbox.cluster.protocol import (ProtocolError, ResponseCode, answers_refusals, field_bool, field_int,
                                        field_str, to_json_bytes)
from rocketbox.cluster.message.system_topics import SYSTEM_TOPICS, is_system_topic
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY
from rocketbox.cluster.shm.store import PutMessageStatus, copy_of_record
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
QUERY_CQ_COUNT_MAX = 1000


def offset_wrapper(store, offsets, group: str, topic: str, queue_id: int) -> dict:
    """RocketMQ's OffsetWrapper of one queue: the broker's max offset, the group's committed one and
    the store time of the last message it consumed (0 when none)."""
    committed = max(offsets.query(group, topic, queue_id) or 0, 0)
    last = store.store_timestamp_at(topic, queue_id, committed - 1) if committed > 0 else 0
    return {"brokerOffset": store.max_offset(topic, queue_id), "consumerOffset": committed, "lastTimestamp": last}


class StoreAdmin:
    def __init__(self, ctx: BrokerContext, group_gets, schedule, transactions):
        self.cfg = ctx.cfg
        self.clock = ctx.clock
        self.store, self.topics, self.offsets, self.groups = ctx.store, ctx.topics, ctx.offsets, ctx.groups
        self.clients = ctx.clients
        self.group_gets = group_gets   # (topic, group) -> served-message windows: consumeTps
        self.schedule, self.transactions = schedule, transactions
        self.may_write, self.on_written = ctx.may_write, ctx.on_written

    # ------------------------------------------------------------ consumption

    @answers_refusals
    def on_broker_consume_stats(self, request: Command, reply=None) -> Command:
        only_orderly = field_bool(request, "isOrder")
        stats_list, total_diff = [], 0
        for group in sorted(self.groups.table()):
            per_topic = []
            online = any(m.subscriptions for m in self.clients.groups.get(group, {}).values())
            for topic in self.offsets.topics_of(group):
                cfg = self.topics.get(topic)
                if cfg is None or (only_orderly and not cfg.order):
                    continue
                if online and self.clients.subscription_data_of(group, topic) is None:
                    continue   # RocketMQ's rule: an online group is shown only on the topics it subscribes
                table = {message_queue_key(topic, self.cfg.broker_name, q): offset_wrapper(self.store, self.offsets, group, topic, q)
                         for q in range(cfg.writeQueueNums)}
                total_diff += sum(w["brokerOffset"] - w["consumerOffset"] for w in table.values())
                per_topic.append({"consumeTps": round(self.group_gets.minute_tps((topic, group)), 2),
                                  "offsetTable": table})
            stats_list.append({group: per_topic})
        body = {"brokerAddr": self.cfg.remoting_address or self.cfg.address, "consumeStatsList": stats_list,
                "totalDiff": total_diff}
        return request.response(ResponseCode.SUCCESS, body=fastjson_dumps(body).encode())

    @answers_refusals
    def on_query_consume_time_span(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        group = field_str(request, "group")
        cfg = self.topics.get(topic)
        if cfg is None:
            raise ProtocolError(f"topic[{topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        now_ms = self.clock.now_ms()
        spans = []
        for queue_id in range(cfg.writeQueueNums):
            first = self.store.min_offset(topic, queue_id)
            end = self.store.max_offset(topic, queue_id)
            min_ms = self.store.store_timestamp_at(topic, queue_id, first) if end > first else 0
            committed = self.offsets.query(group, topic, queue_id) or 0
            span = {"messageQueue": {"topic": topic, "brokerName": self.cfg.broker_name, "queueId": queue_id},
                    "minTimeStamp": min_ms, "maxTimeStamp": self.store.store_timestamp_at(topic, queue_id, end - 1),
                    "consumeTimeStamp": (self.store.store_timestamp_at(topic, queue_id, committed - 1)
                                         if committed > 0 else min_ms), "delayTime": 0}
            if committed < end:
                span["delayTime"] = now_ms - self.store.store_timestamp_at(topic, queue_id, committed)
            spans.append(span)
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"consumeTimeSpanSet": spans}))

    @answers_refusals
    def on_query_correction_offset(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        excluded = {g for g in (request.fields.get("filterGroups") or "").split(",") if g}
        lowest: dict[int, int] = {}
        for group in self.offsets.groups_of(topic):
            if group in excluded:
                continue
            for queue_id, offset in self.offsets.table.get(f"{topic}@{group}", {}).items():
                lowest[queue_id] = min(offset, lowest.get(queue_id, offset))
        compare = request.fields.get("compareGroup")
        for queue_id, offset in (self.offsets.table.get(f"{topic}@{compare}", {}) if compare else {}).items():
            if queue_id in lowest and lowest[queue_id] > offset:
                lowest[queue_id] = LONG_MAX
        return request.response(ResponseCode.SUCCESS, body=fastjson_dumps({"correctionOffsets": lowest}).encode())

    @answers_refusals
    def on_clone_group_offset(self, request: Command, reply=None) -> Command:
        source = field_str(request, "srcGroup")
        target = field_str(request, "destGroup")
        topic = request.fields.get("topic") or ""
        offline = field_bool(request, "offline")
        online = any(m.subscriptions for m in self.clients.groups.get(source, {}).values())
        cloned = []
        for name in [topic] if topic else self.offsets.topics_of(source):
            if self.topics.get(name) is None:
                continue
            if not offline and online and self.clients.subscription_data_of(source, name) is None:
                continue   # RocketMQ's rule: an online source is cloned only on the topics it subscribes
            for queue_id, offset in sorted(self.offsets.table.get(f"{name}@{source}", {}).items()):
                self.offsets.commit(target, name, queue_id, offset)
            cloned.append(name)
        log.info("offsets of group %s cloned to %s on %s", source, target, ", ".join(cloned) or "no topic")
        return request.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------ queues and the store

    @answers_refusals
    def on_query_consume_queue(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        queue_id = field_int(request, "queueId")
        index = field_int(request, "index")
        count = max(0, min(field_int(request, "count", 10), QUERY_CQ_COUNT_MAX))
        if self.store.cqs.get(topic, queue_id) is None:   # RocketMQ's wording
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"{queue_id}@{topic} is not exist!")
        low, high = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
        body: dict = {"maxQueueIndex": high, "minQueueIndex": low, "queueData": []}
        group = request.fields.get("consumerGroup")
        if group:
            subscription = self.clients.subscription_data_of(group, topic)
            body["subscriptionData"] = subscription
            body["filterData"] = "null" if subscription is not None else f"{group}@{topic} is not online!"
        remark = ""
        if low <= index < high:
            entries = self.store.queue_entries(topic, queue_id, index, count)
            body["queueData"] = [{"physicOffset": phys, "physicSize": size, "tagsCode": tag, "eval": False}
                                 for _offset, phys, size, tag in entries]
        else:
            remark = f"Index {index} of {queue_id}@{topic} is not exist!"
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(body), remark=remark)

    def on_clean_expired_consume_queue(self, request: Command, reply=None) -> Command:
        deleted = self.store.cqs.delete_files_below(self.store.commitlog_floor())
        log.info("cleanExpiredCQ: %d ConsumeQueue files below the CommitLog's floor deleted", deleted)
        return request.response(ResponseCode.SUCCESS, remark=f"{deleted} ConsumeQueue files deleted")

    def system_topics(self) -> list[str]:
        """RocketMQ's system topics, the cluster's and broker's names (RocketMQ lists them too), and
        the broker's own topics (rmq_sys_*)."""
        own = {topic for topic in self.topics.topics if is_system_topic(topic)}
        return sorted(SYSTEM_TOPICS | own | {self.cfg.cluster_name, self.cfg.broker_name})

    def on_system_topic_list(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"topicList": self.system_topics()}))

    def on_all_delay_offset(self, request: Command, reply=None) -> Command:
        """DelayOffsetSerializeWrapper: delay level -> the schedule queue's delivered offset."""
        table = {level: delivered for level, (delivered, _max) in schedule_offsets(self.schedule, self.store).items()}
        return request.response(ResponseCode.SUCCESS, body=fastjson_dumps({"offsetTable": table}).encode())

    @answers_refusals
    def on_resume_check_half_message(self, request: Command, reply=None) -> Command:
        msg_id = field_str(request, "msgId")
        phys, rec = record_of_msg_id(self.store, msg_id)
        if rec is None or rec.topic != HALF_TOPIC:
            raise ProtocolError(f"{msg_id} names no half message (no record of {HALF_TOPIC} at CommitLog offset {phys})")
        uniq = rec.properties.get(PROPERTY_UNIQ_KEY, "")
        if uniq in self.transactions.resolved:
            raise ProtocolError(f"the transaction {uniq} is resolved already (committed, rolled back or discarded "
                                f"after its checks): nothing is left to check")
        if not self.may_write():
            raise ProtocolError(f"broker {self.cfg.broker_name} does not take writes now (a slave, or its lease "
                                f"lapsed)", ResponseCode.SERVICE_NOT_AVAILABLE)
        props = {**rec.properties, PROPERTY_CHECK_TIMES: "0"}
        result = self.store.put_messages(HALF_TOPIC, 0, [copy_of_record(rec, props)])
        if result.status != PutMessageStatus.PUT_OK:
            raise ProtocolError(f"Put message back to {HALF_TOPIC} failed: {result.status.name}")
        self.on_written()
        log.info("transaction %s: half message written again, its checks start over", uniq)
        return request.response(ResponseCode.SUCCESS)
