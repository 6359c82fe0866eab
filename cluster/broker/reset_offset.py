"""INVOKE_BROKER_TO_RESET_OFFSET (222): move a consumer group's offsets of a topic to a time
while the group runs (RocketMQ's resetOffsetByTime, Broker2Client.resetOffset).

Per queue of the topic on this broker: the first offset stored at or after ``timestamp``
(the maximum for -1). With ``isForce`` (the admin's default) that is the new offset; without
it the group's committed offset is kept when it is already earlier. The broker then tells
every online member of the group, one-way, with RESET_CONSUMER_CLIENT_OFFSET (220) and the
table as body; each member drops those queues and restarts them there. The bodies are RocketMQ's
ResetOffsetBody, ``offsetTable`` keyed by MessageQueue objects in fastjson's dialect (what the
Java client and mqadmin read), except to a C++ member: ResetOffsetBodyForC's list of rows, what
it reads. (RocketMQ's broker picks one form for every member from the admin's language: a C++
admin, mqadmin resetOffsetByTime -c, gets every member the list; here each member gets its own.) For a clustering
group the broker also commits the new offsets itself, so they hold even for queues whose
member is between rebalances; a broadcasting group's offsets live on its members.

A group with no online member is answered CONSUMER_NOT_ONLINE and nothing changes (the
admin then sets the committed offsets directly, as RocketMQ's tools fall back to). RocketMQ 5's
tools may name one queue (``queueId``) and the offset to restart it from (``offset``, -1 for
none: by time then), resetOffsetByTime -b -q -o; that request is served whether members are
online or not, as RocketMQ 5's broker resets offsets itself.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (MessageQueue, ProtocolError, RequestCode, ResponseCode, answers_refusals,
                                        field_int, field_str, reset_offset_body)
from rocketbox.cluster.wire_format import LANGUAGE_CPP, Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

RESET_TO_MAX_OFFSET = -1


class ResetOffsetProcessor:
    """INVOKE_BROKER_TO_RESET_OFFSET, from the parts it uses: topics, the group's members and how
    to tell them, the store's offsets by time, the group's committed offsets."""

    def __init__(self, ctx: BrokerContext):
        self.broker_name = ctx.cfg.broker_name
        self.topics, self.clients, self.store, self.offsets = ctx.topics, ctx.clients, ctx.store, ctx.offsets
        self.notify_peer = ctx.notify_peer  # (peer, command): a one-way request to a connected client
        self.resets = 0

    @answers_refusals
    def on_invoke_broker_to_reset_offset(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        group = field_str(request, "group")
        timestamp_ms = field_int(request, "timestamp")
        force = request.fields.get("isForce", "true").lower() == "true"
        cfg = self.topics.get(topic)
        if cfg is None:
            raise ProtocolError(f"topic {topic} does not exist on {self.broker_name}",
                                ResponseCode.TOPIC_NOT_EXIST)
        # RocketMQ 5's tools may name one queue, and an offset for it (-1: none): resetOffsetByTime -b -q -o.
        queue_id = field_int(request, "queueId", -1)
        exact = field_int(request, "offset", -1)
        members = self.clients.groups.get(group) or {}
        if not members and queue_id < 0:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    remark=f"no consumer of group {group} is online; cannot reset offsets of {topic}")
        offsets: dict[MessageQueue, int] = {}
        for qid in [queue_id] if queue_id >= 0 else range(max(cfg.readQueueNums, cfg.writeQueueNums)):
            offsets[MessageQueue(topic, self.broker_name, qid)] = self._target(topic, group, qid, timestamp_ms, force,
                                                                                exact if queue_id >= 0 else -1)
        if not members or any(m.message_model == "CLUSTERING" for m in members.values()):
            for mq, offset in offsets.items():
                self.offsets.commit(group, topic, mq.queue_id, offset)
        fields = {"topic": topic, "group": group, "timestamp": str(timestamp_ms), "isForce": str(force).lower()}
        bodies = {False: reset_offset_body(offsets), True: reset_offset_body(offsets, rows=True)}
        for member in members.values():
            if member.peer is not None:
                body = bodies[member.language == LANGUAGE_CPP]
                self.notify_peer(member.peer, Command(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(fields), body))
        self.resets += 1
        _limited.info("reset", "offsets of group %s on %s reset to %d: %s; told %d members", group, topic,
                      timestamp_ms, {mq.queue_id: o for mq, o in offsets.items()}, len(members))
        return request.response(ResponseCode.SUCCESS, body=bodies[False])

    def _target(self, topic: str, group: str, queue_id: int, timestamp_ms: int, force: bool, exact: int) -> int:
        """Where ``queue_id`` restarts: ``exact`` (within the queue, as RocketMQ 5 checks it), else the
        first offset stored at or after the time (the end for -1), else the committed offset when
        that is earlier and the reset is not forced."""
        if exact != -1:
            low, high = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
            if not low <= exact <= high:
                raise ProtocolError(f"Target offset {exact} not in consume queue range [{low}-{high}]")
            return exact
        if timestamp_ms == RESET_TO_MAX_OFFSET:
            target = self.store.max_offset(topic, queue_id)
        else:
            target = self.store.offset_by_time(topic, queue_id, timestamp_ms)
        committed = self.offsets.query(group, topic, queue_id)
        if not force and committed is not None and committed <= target:
            target = committed
        return target
