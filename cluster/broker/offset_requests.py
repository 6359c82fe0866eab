"""A consumer group's offsets and a queue's bounds: QUERY/UPDATE_CONSUMER_OFFSET (14/15),
GET_MAX_OFFSET/GET_MIN_OFFSET (30/31) and SEARCH_OFFSET_BY_TIMESTAMP (29)."""

from __future__ import annotations

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.protocol import (ProtocolError, ResponseCode, answers_refusals, field_int, field_str,
                                        require_name)
from rocketbox.cluster.wire_format import Command


class OffsetRequests:
    def __init__(self, ctx: BrokerContext, controller):
        self.cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        self.controller = controller
        # Whether this broker is master now (its controller lease holds).
        self.may_write = ctx.may_write

    def _topic_queue(self, request: Command) -> tuple[str, int]:
        topic = field_str(request, "topic")
        queue_id = field_int(request, "queueId")
        cfg = self.topics.get(topic)
        if cfg is None:
            raise ProtocolError(f"topic {topic} does not exist", ResponseCode.TOPIC_NOT_EXIST)
        if not 0 <= queue_id < max(cfg.readQueueNums, cfg.writeQueueNums):
            raise ProtocolError(f"queueId {queue_id} is out of range for topic {topic}")
        return topic, queue_id

    @answers_refusals
    def on_query_consumer_offset(self, request: Command, reply=None) -> Command:
        group = field_str(request, "consumerGroup")
        topic, queue_id = self._topic_queue(request)
        offset = self.offsets.query(group, topic, queue_id)
        if offset is None:
            # RocketMQ's new-group rule: start at 0 while the queue still holds its first message.
            if self.store.min_offset(topic, queue_id) <= 0:
                offset = 0
            else:
                return request.response(ResponseCode.QUERY_NOT_FOUND,
                                        remark=f"no offset committed by {group} for {topic}:{queue_id}")
        return request.response(ResponseCode.SUCCESS, {"offset": str(offset)})

    @answers_refusals
    def on_update_consumer_offset(self, request: Command, reply=None) -> Command:
        group = field_str(request, "consumerGroup")
        require_name("group", group)
        topic, queue_id = self._topic_queue(request)
        offset = field_int(request, "commitOffset")
        if offset < 0 or offset > self.store.readable_end(topic, queue_id):
            raise ProtocolError(f"offset {offset} is outside [0, {self.store.readable_end(topic, queue_id)}] "
                                f"of {topic}:{queue_id}")
        if self.controller is not None and not self.cfg.is_slave and not self.may_write():
            # A master replaced while stopped or cut off: a commit taken here would be overwritten
            # by the new master's offsets when this one rejoins as a slave.
            raise ProtocolError(f"broker {self.cfg.broker_name} is not sure it is still master (its controller "
                                f"lease lapsed): commit to the master", ResponseCode.SERVICE_NOT_AVAILABLE)
        self.offsets.commit(group, topic, queue_id, offset)
        # Who took it: a commit a slave took is not final (the client sends it again to the master).
        return request.response(ResponseCode.SUCCESS, {"brokerId": str(self.cfg.broker_id)})

    @answers_refusals
    def on_get_max_offset(self, request: Command, reply=None) -> Command:
        topic, queue_id = self._topic_queue(request)
        return request.response(ResponseCode.SUCCESS, {"offset": str(self.store.max_offset(topic, queue_id))})

    @answers_refusals
    def on_get_min_offset(self, request: Command, reply=None) -> Command:
        topic, queue_id = self._topic_queue(request)
        return request.response(ResponseCode.SUCCESS, {"offset": str(self.store.min_offset(topic, queue_id))})

    @answers_refusals
    def on_search_offset_by_timestamp(self, request: Command, reply=None) -> Command:
        topic, queue_id = self._topic_queue(request)
        timestamp_ms = field_int(request, "timestamp")
        offset = self.store.offset_by_time(topic, queue_id, timestamp_ms)
        return request.response(ResponseCode.SUCCESS, {"offset": str(offset)})
