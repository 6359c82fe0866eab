"""Topic admin on a broker: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
CLEAN_UNUSED_TOPIC (316) and GET_TOPIC_CONFIG (351: one topic's config with its attributes, as
RocketMQ 5's proxy reads it)."""

from __future__ import annotations

import logging
from dataclasses import asdict

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.topics import TopicConfig
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (PERM_READ_WRITE, ProtocolError, ResponseCode, answers_refusals, field_int,
                                        field_str, require_name, to_json_bytes)
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY, is_not_sendable_topic, is_system_topic
from rocketbox.cluster.topic_attributes import AttributeProblem, apply_modification, parse_modification
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


class TopicRequests:
    def __init__(self, ctx: BrokerContext):
        self.cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        # Publishes the topic table to the NameServers.
        self.register_with_namesrvs = ctx.publish_topics

    @answers_refusals
    def on_update_topic(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        require_name("topic", topic)
        if is_system_topic(topic):
            # RocketMQ's TopicValidator.isSystemTopic refusal: the brokers' own and RocketMQ's reserved names.
            role = ("the auto-create template" if topic == AUTO_CREATE_TOPIC_KEY
                    else "delayed or half messages wait there" if is_not_sendable_topic(topic) else "reserved")
            raise ProtocolError(f"the topic {topic} is conflict with system topic ({role})",
                                ResponseCode.NO_PERMISSION)
        read = field_int(request, "readQueueNums", self.cfg.topic_queue_count_default)
        write = field_int(request, "writeQueueNums", read)
        if not (0 < read <= 1024 and 0 < write <= 1024):
            raise ProtocolError(f"queue counts must be within 1..1024, got read {read} write {write}")
        perm = field_int(request, "perm", PERM_READ_WRITE)
        if not 0 <= perm <= 7:
            raise ProtocolError(f"perm {perm} is not a RocketMQ permission (0..7: 4 read, 2 write, 1 inherit)")
        current = self.topics.get(topic)
        try:
            # RocketMQ answers a refused attribute change with SYSTEM_ERROR and the reason.
            attributes = apply_modification(current.attributes if current else {},
                                            parse_modification(request.fields.get("attributes")),
                                            creating=current is None)
        except AttributeProblem as exc:
            raise ProtocolError(f"topic {topic}: {exc}") from None
        self.topics.upsert(TopicConfig(topic, read, write, perm, field_int(request, "topicSysFlag", 0),
                                       request.fields.get("order", "false") == "true", attributes))
        _limited.info("topic-set", "topic %s set: read %d write %d perm %d attributes %s", topic, read, write, perm,
                      attributes)
        self.register_with_namesrvs()
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_get_topic_config(self, request: Command, reply=None) -> Command:
        """The body is RocketMQ's TopicConfigAndQueueMapping without a mapping: the config's fields."""
        topic = field_str(request, "topic")
        cfg = self.topics.get(topic)
        if cfg is None:
            # Answered, not logged: asking about a topic the broker lacks is routine (proxies do).
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"No topic in this broker. topic: {topic}")
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(asdict(cfg)))

    @answers_refusals
    def on_delete_topic(self, request: Command, reply=None) -> Command:
        """RocketMQ's answer: a topic this broker does not have is deleted already (SUCCESS; mqadmin
        deleteSubGroup deletes a group's retry and dead-letter topics this way, had it any)."""
        topic = field_str(request, "topic")
        if is_system_topic(topic):
            raise ProtocolError(f"The topic[{topic}] is conflict with system topic.")
        if self.topics.get(topic) is None and topic not in self.store.topics_and_queues():
            _limited.info("topic-absent", "topic %s: deleted already (this broker has no such topic)", topic)
            return request.response(ResponseCode.SUCCESS)
        self._delete(topic)
        self.register_with_namesrvs()
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_clean_unused_topic(self, request: Command, reply=None) -> Command:
        """mqadmin cleanUnusedTopic: the ConsumeQueues of topics the broker has no config for (a
        topic deleted while a worker still had it mapped, one a crash left half deleted), but
        the broker's own (schedule, transactions, rmq_sys_*)."""
        unused = [topic for topic in self.store.topics_and_queues()
                  if self.topics.get(topic) is None and not is_system_topic(topic)]
        for topic in unused:
            self._delete(topic)
        log.info("cleanUnusedTopic: %s", ", ".join(unused) or "nothing to clean")
        return request.response(ResponseCode.SUCCESS, remark=f"{len(unused)} unused topics cleaned")

    def _delete(self, topic: str) -> None:
        if not self.store.queue_entries_caught_up():
            # Entries not written yet would land in the files of a re-created topic.
            raise ProtocolError(f"ConsumeQueue entries are behind the CommitLog; delete {topic} again shortly",
                                ResponseCode.SYSTEM_BUSY)
        self.topics.delete(topic)
        self.store.delete_topic(topic)
        self.offsets.drop_topic(topic)
        _limited.info("topic-deleted", "topic %s deleted", topic)
