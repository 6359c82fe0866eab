"""Request-reply (RocketMQ 4.6+'s DefaultMQProducer.request): SEND_REPLY_MESSAGE (324) and
SEND_REPLY_MESSAGE_V2 (325), as RocketMQ's ReplyMessageProcessor serves them.

A requester sends an ordinary message carrying CORRELATION_ID, REPLY_TO_CLIENT (its client id)
and TTL; the broker stamps CLUSTER on it (``send.py``). A responder builds the reply with
MessageUtil.createReplyMessage, which needs CLUSTER, and sends it to ``<cluster>_REPLY_TOPIC``
(made at boot, 1 queue, as RocketMQ's TopicConfigManager does) with one of these codes. The broker
stores the reply there (RocketMQ's storeReplyMessageEnable, on by default) and pushes it at once to
the requester's connection, found by its producer heartbeat's client id, as
PUSH_REPLY_MESSAGE_TO_CLIENT (326: the send's header fields plus bornHost, storeHost and
storeTimestamp, PUSH_REPLY_TIME added to the properties, the body). The responder's answer is
SUCCESS once the requester took it, else SYSTEM_ERROR saying why ("push reply message fail, channel
of <id> not found.", "reply message properties[REPLY_TO_CLIENT] is null", ...), as RocketMQ's.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.topics import TopicConfig
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (PERM_READ_WRITE, PERM_WRITE, ProtocolError, RequestCode, ResponseCode,
                                        SEND_V2_LONG_NAMES, answers_refusals, field_int, require_name)
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import decode_properties, properties_text
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_MASK
from rocketbox.cluster.shm.store import MessageToStore, PutMessageStatus
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# Broker -> the requester's connection: RocketMQ's clients serve it; RocketBox's own client makes no
# requests that wait for replies, so the code is not among the RequestCodes every process serves.
PUSH_REPLY_MESSAGE_TO_CLIENT = 326
# MixAll.REPLY_TOPIC_POSTFIX and the MessageConst properties of a request and its reply.
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
PROPERTY_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
# How long the requester's connection has to take the push (RocketMQ's Broker2Client.callClient: 3 s).
PUSH_TIMEOUT_S = 3.0
# The send header fields the push repeats (ReplyMessageRequestHeader).
_REPEATED = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
             "bornTimestamp", "flag", "reconsumeTimes", "unitMode")


def reply_topic(cluster_name: str) -> str:
    return f"{cluster_name}_{REPLY_TOPIC_POSTFIX}"


class ReplyProcessor:
    def __init__(self, ctx: BrokerContext, address: str):
        """``address``: this broker's remoting address (the push's storeHost)."""
        self.cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.clients = ctx.clients
        self.clock = ctx.clock
        # call_client(peer, command, on_answer, timeout_s): a request to a connected client.
        self.call_client = ctx.call_peer
        self.on_written = ctx.on_written
        self.address = address
        self.pushed = 0

    def ensure_reply_topic(self) -> bool:
        """Make ``<cluster>_REPLY_TOPIC`` if missing (a master, at boot); True when it was made."""
        topic = reply_topic(self.cfg.cluster_name)
        if self.topics.get(topic) is not None:
            return False
        self.topics.upsert(TopicConfig(topic, 1, 1, PERM_READ_WRITE))
        return True

    @answers_refusals
    def on_send_reply(self, request: Command, reply) -> Command | None:
        names = SEND_V2_LONG_NAMES if request.code == RequestCode.SEND_REPLY_MESSAGE_V2 else None
        fields = {name: request.fields[names[name] if names else name] for name in (*_REPEATED, "properties")
                  if (names[name] if names else name) in request.fields}
        topic = fields.get("topic", "")
        require_name("topic", topic, ResponseCode.MESSAGE_ILLEGAL)
        topic_cfg = self.topics.get(topic)
        if topic_cfg is None:
            raise ProtocolError(f"topic {topic} does not exist (a reply goes to {reply_topic(self.cfg.cluster_name)})",
                                ResponseCode.TOPIC_NOT_EXIST)
        if not topic_cfg.perm & PERM_WRITE:
            raise ProtocolError(f"topic {topic} is not writable on this broker", ResponseCode.NO_PERMISSION)
        queue_id = field_int(request, "queueId", -1, names["queueId"] if names else "queueId")
        if queue_id >= topic_cfg.writeQueueNums:
            raise ProtocolError(f"queue {queue_id} does not exist: topic {topic} has {topic_cfg.writeQueueNums} "
                                f"write queues", ResponseCode.MESSAGE_ILLEGAL)
        queue_id = max(queue_id, 0)
        properties = decode_properties(fields.get("properties", "").encode())
        requester = properties.get(PROPERTY_REPLY_TO_CLIENT)
        stored = self._store(request, topic, queue_id, fields)
        if requester is None:
            return self._answer(request, stored, f"reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null")
        peer = self.clients.producer_peer(requester)
        if peer is None:
            _limited.warning("reply-no-channel", "push reply message fail, channel of <%s> not found", requester)
            return self._answer(request, stored, f"push reply message fail, channel of <{requester}> not found.")
        properties[PROPERTY_PUSH_REPLY_TIME] = str(self.clock.now_ms())
        host = request.peer_address or "127.0.0.1"
        push = Command(PUSH_REPLY_MESSAGE_TO_CLIENT, {
            **{name: value for name, value in fields.items() if name != "properties"},
            "properties": properties_text(properties.items()),
            "bornHost": f"{host}:{request.peer_port}", "storeHost": self.address,
            "storeTimestamp": str(self.clock.now_ms())}, request.body)

        def pushed(answer) -> None:
            if isinstance(answer, Command) and answer.code == ResponseCode.SUCCESS:
                self.pushed += 1
                reply(self._answer(request, stored, None))
            else:
                why = answer.remark if isinstance(answer, Command) else str(answer)
                log.info("push reply message to %s failed: %s", requester, why)
                reply(self._answer(request, stored, f"push reply message to {requester} fail."))

        self.call_client(peer, push, pushed, PUSH_TIMEOUT_S)
        return None

    def _store(self, request: Command, topic: str, queue_id: int, fields: dict) -> Command | None:
        """Store the reply in its topic (storeReplyMessageEnable); the success answer it makes, or None."""
        try:
            message = MessageToStore(
                body=request.body, flag=int(fields.get("flag") or 0),
                properties=fields.get("properties", "").encode(),
                sys_flag=int(fields.get("sysFlag") or 0) & ~SYSFLAG_TRANSACTION_MASK,
                born_timestamp_ms=int(fields.get("bornTimestamp") or self.clock.now_ms()),
                born_host=pack_host(request.peer_address or "127.0.0.1", request.peer_port),
                reconsume_times=int(fields.get("reconsumeTimes") or 0))
        except (ValueError, OSError) as exc:
            raise ProtocolError(f"malformed reply header: {exc}", ResponseCode.MESSAGE_ILLEGAL) from None
        result = self.store.put_messages(topic, queue_id, (message,))
        if result.status != PutMessageStatus.PUT_OK:
            log.warning("storing a reply in %s failed: %s", topic, result.status.name)
            return None
        self.on_written()
        return request.response(ResponseCode.SUCCESS, {"msgId": result.msg_ids_text, "queueId": str(queue_id),
                                                       "queueOffset": str(result.queue_offset)})

    @staticmethod
    def _answer(request: Command, stored: Command | None, failure: str | None) -> Command:
        if failure is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=failure)
        # RocketMQ answers msgId "0" when the reply was pushed but not stored.
        return stored or request.response(ResponseCode.SUCCESS, {"msgId": "0", "queueId": "0", "queueOffset": "0"})
