"""CONSUMER_SEND_MSG_BACK: a message a consumer failed to process goes to its group's
retry topic, later, or to its dead-letter topic (rocketmq-protocol.md §5.7).

The broker reads the failed message by its CommitLog offset. Under the group's maximum
(``maxReconsumeTimes``, RocketMQ's 16 by default) it is parked for delay level
``3 + reconsumeTimes`` (10 s, 30 s, 1 min, ... when 0 was asked) and then delivered to
``%RETRY%<group>``, which every clustering member of the group also subscribes to; at the
maximum, or when the consumer asks with a negative level, it goes to ``%DLQ%<group>``.
The copy keeps body, flag, properties (UNIQ_KEY included, so the application sees the same
message id), records the original topic in RETRY_TOPIC once and the original id in
ORIGIN_MESSAGE_ID, and counts reconsumeTimes + 1.

The offset names no topic, and the copy lands where the caller's group reads it: under access
control the caller needs SUB on the topic the record really belongs to (acl/records.py), and a
request that names the original topic (``originTopic``: Java clients, the proxy) must name the
record's. RocketMQ copies any offset it is given.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.acl.records import real_topic, require_record
from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (ProtocolError, ResponseCode, answers_refusals, dlq_topic, field_int, field_str,
                              require_name, retry_topic)
from rocketbox.cluster.message.properties import (PROPERTY_DELAY, PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC,
                                                  PROPERTY_RETRY_TOPIC, PROPERTY_UNIQ_KEY)
from rocketbox.cluster.shm.schedule_format import TIMER_PROPERTIES, queue_of_level
from rocketbox.cluster.message.system_topics import SCHEDULE_TOPIC
from rocketbox.cluster.shm.store import PutMessageStatus, copy_of_record
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RETRY_LEVEL_BASE = 3


class SendBackProcessor:
    def __init__(self, ctx: BrokerContext, delay_level_count: int):
        self.store = ctx.store
        # group -> its subscription group's retryMaxTimes (RocketMQ's default 16).
        self.retry_max_times_of = ctx.groups.retry_max_times
        self.delay_level_count = delay_level_count
        self.durability = ctx.durability
        self.on_written = ctx.on_written
        self.ensure_system_topic = ctx.ensure_system_topic
        self.sent_to_retry = 0
        self.sent_to_dlq = 0
        self.dlq_by_group: dict[tuple[str, str], int] = {}   # (group, original topic) -> messages

    @answers_refusals
    def on_send_back(self, request: Command, reply=None) -> Command | None:
        group = field_str(request, "group")
        require_name("group", group)
        phys = field_int(request, "offset")
        asked_level = field_int(request, "delayLevel", 0)
        # RocketMQ: the client's own limit when it sends one (3.4.9 and later), else the group's retryMaxTimes.
        reconsume_max = field_int(request, "maxReconsumeTimes", self.retry_max_times_of(group))
        rec = self.store.read_record(phys)
        if rec is None:
            raise ProtocolError(f"no message at CommitLog offset {phys}", ResponseCode.SYSTEM_ERROR)
        props = rec.properties
        origin_topic = request.fields.get("originTopic")
        if origin_topic and origin_topic not in (rec.topic, real_topic(rec.topic, props)):
            # The proxy names the topic it checked; Java clients the one they consumed from.
            raise ProtocolError(f"the message at CommitLog offset {phys} is not of topic {origin_topic}",
                                ResponseCode.SYSTEM_ERROR)
        # The copy lands where the caller's group reads it: only a record it may read is copied.
        require_record(request, rec)
        props.setdefault(PROPERTY_RETRY_TOPIC, rec.topic)
        origin = request.fields.get("originMsgId") or props.get(PROPERTY_UNIQ_KEY) or rec.offset_msg_id
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, origin)
        levels = self.delay_level_count
        if rec.reconsume_times >= reconsume_max or asked_level < 0:
            target, queue_id = dlq_topic(group), 0
            self.ensure_system_topic(target)
            self.sent_to_dlq += 1
            dlq_key = (group, props[PROPERTY_RETRY_TOPIC])
            self.dlq_by_group[dlq_key] = self.dlq_by_group.get(dlq_key, 0) + 1
            _limited.info("dead-letter", "message %s of %s goes to %s after %d attempts", origin, rec.topic, target,
                          rec.reconsume_times + 1)
        else:
            retry = retry_topic(group)
            self.ensure_system_topic(retry)
            level = asked_level if asked_level > 0 else RETRY_LEVEL_BASE + rec.reconsume_times
            props[PROPERTY_DELAY] = str(min(level, levels))
            for name in TIMER_PROPERTIES:   # a delay level wins over a timed origin (RocketMQ's checkIfTimerMessage)
                props.pop(name, None)
            props[PROPERTY_REAL_TOPIC] = retry
            props[PROPERTY_REAL_QID] = "0"
            target, queue_id = SCHEDULE_TOPIC, queue_of_level(min(level, levels))
            self.sent_to_retry += 1
        message = copy_of_record(rec, props, reconsume_times=rec.reconsume_times + 1)
        result = self.store.put_messages(target, queue_id, [message])
        if result.status != PutMessageStatus.PUT_OK:
            raise ProtocolError(f"the store refused the message: {result.status.name}", ResponseCode.SYSTEM_ERROR)
        self.on_written()
        # The consumer moves past the message on this answer: the copy is as durable as a send first.
        return self.durability.answer(request.response(ResponseCode.SUCCESS), result.end_phys_offset, reply)
