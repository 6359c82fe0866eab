"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, read in order.

``on_send``: the broker may take writes and its disk keeps up → ``parse`` the header once into a
``SendRequest`` (properties decoded at most once, and only when a route needs them) → the topic and
queue it goes to (a priority message: the queue of its priority, ``_priority_queue``) → ``_route``:
half (the transaction's half topic), delayed (the schedule topic), a send to a retry topic past its
group's maximum (the group's dead-letter topic), FIFO (a label only) → the store → the one
durability wait (``durability.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass
from operator import itemgetter

from rocketbox.cluster.config import NAME_LENGTH_MAX, name_problem
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (DLQ_TOPIC_PREFIX, PERM_WRITE, RETRY_TOPIC_PREFIX, ProtocolError, RequestCode,
                                        ResponseCode, SEND_FIELDS, SEND_V2_LONG_NAMES, answers_refusals, field_int,
                                        require_name)
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY, SCHEDULE_TOPIC, is_not_sendable_topic
from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.meters import InTraffic
from rocketbox.cluster.broker.transaction import HALF_TOPIC
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message import recall_handle
from rocketbox.cluster.message.properties import (PROPERTY_CLUSTER, PROPERTY_DELAY, PROPERTY_PRIORITY,
                                                  PROPERTY_SEPARATOR, PROPERTY_TIMER_OUT_MS,
                                                  PROPERTY_TRAN_MSG, PROPERTY_UNIQ_KEY, PROPERTY_WAIT,
                                                  decode_properties, encode_properties, property_mark,
                                                  split_property)
from rocketbox.cluster.shm.schedule_format import TIMER_PROPERTIES, is_timed
from rocketbox.cluster.message.sysflags import (SYSFLAG_COMPRESSED, SYSFLAG_COMPRESSION_TYPE_MASK, SYSFLAG_MULTI_TAGS,
                                                SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED)
from rocketbox.cluster.shm.store import BatchBody, MessageToStore, PutMessageStatus as PutStatus
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# A client may set these SYSFLAG bits on any send; PREPARED (0x4) only on a single half message. The
# compression type (bits 8-10) goes with COMPRESSED: the Java client 4.9.8 sends 0x301 for a zlib body
# (shm/body_compression.py). The rest are the store's (BORNHOST_V6 0x10 and STOREHOSTADDRESS_V6 0x20 set
# a record's layout, which holds IPv4 hosts here; COMMIT/ROLLBACK types) or RocketMQ 5's batch bits.
SEND_SYSFLAG_ALLOWED = SYSFLAG_COMPRESSED | SYSFLAG_MULTI_TAGS | SYSFLAG_COMPRESSION_TYPE_MASK

_PUT_STATUS_CODES = {
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.DISK_FULL: ResponseCode.DISK_FULL,
}


@functools.lru_cache(maxsize=1024)
def _born_host(peer_address: str, peer_port: int) -> bytes:
    """BORNHOST: the sender's IPv4 address and port, as RocketMQ stores its channel's remote address
    (ZeroMQ tells no port: 0 there)."""
    try:
        return pack_host(peer_address, peer_port)
    except OSError:  # not IPv4 text (IPC, IPv6): the loopback stands in
        return pack_host("127.0.0.1", peer_port)


def stored_send_properties(properties_text: str, cluster_mark: str, drop_wait: bool,
                           properties: dict[str, str] | None = None) -> str:
    """What a single send's properties are stored as, as RocketMQ's SendMessageProcessor stores them:
    CLUSTER (the broker's cluster) added, so a responder can address a reply (MessageUtil.createReplyMessage
    reads it), and, unless ``drop_wait`` is false, WAIT left out (RocketMQ: "no need to store WAIT=true";
    a delayed or half message keeps it, since RocketMQ writes those properties again with WAIT back in).
    ``cluster_mark`` is ``CLUSTER\x01<name>\x02``; a CLUSTER the client sent is overruled (the later pair wins).
    ``properties``: the text already decoded, when the caller has it."""
    if drop_wait and _WAIT_MARK in properties_text and (
            properties_text.startswith(_WAIT_MARK) or _WAIT_PAIR_START in properties_text):
        properties = dict(decode_properties(properties_text.encode()) if properties is None else properties)
        properties.pop(PROPERTY_WAIT, None)
        properties_text = encode_properties(properties).decode()
    if properties_text and not properties_text.endswith(PROPERTY_SEPARATOR):
        properties_text += PROPERTY_SEPARATOR
    return properties_text + cluster_mark


_DELAY_MARK = property_mark(PROPERTY_DELAY)
_TIMER_MARKS = tuple(property_mark(name) for name in TIMER_PROPERTIES)
_TIMER_MARKS_PREFIX = os.path.commonprefix(_TIMER_MARKS)   # none of them without it
_HALF_MARK = property_mark(PROPERTY_TRAN_MSG, "true")
_WAIT_MARK = property_mark(PROPERTY_WAIT)
_WAIT_PAIR_START = PROPERTY_SEPARATOR + _WAIT_MARK
# RocketMQ 5 marks a FIFO message by its sharding key (the message_type label "fifo").
_SHARDING_KEY_MARK = property_mark("__SHARDINGKEY")
_PRIORITY_MARK = property_mark(PROPERTY_PRIORITY)

# The key each header field is read by: SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry RocketMQ's
# one-letter names (SendMessageRequestHeaderV2, as the ACL check reads them), SEND_MESSAGE the long ones.
_LONG_KEYS = {name: name for name in SEND_FIELDS}
_KEYS_OF_CODE = {RequestCode.SEND_MESSAGE_V2: SEND_V2_LONG_NAMES, RequestCode.SEND_BATCH_MESSAGE: SEND_V2_LONG_NAMES}


@dataclass(slots=True)
class SendRequest:
    """One send's header, read and checked once. ``properties`` is the decoded text, None when no
    route needs it (a plain send stores its text as it came, plus CLUSTER)."""
    topic: str
    queue_id: int               # -1: the broker picks
    body: bytes
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes
    properties_text: str
    properties: dict | None
    batch: bool
    half: bool
    delayed: bool
    flag: int
    reconsume_times: int
    reconsume_max: int | None   # the client's maxReconsumeTimes (a send to a retry topic)
    wait_store: bool            # WAIT=false asks not to wait for the store (RocketMQ's waitStoreMsgOK)
    default_queue_text: str | None   # defaultTopicQueueNums, read only when the topic is made
    stored_text: str | None = None   # the properties as stored but CLUSTER (WAIT cut), when already known


def parse(request: Command, now_ms) -> SendRequest:
    """The header of a send, typed and checked (``_parse_checked``); a plain single send, the usual
    one, in the fewest steps (``_parse_plain``), which leaves anything else to the checked path."""
    try:
        send = _parse_plain(request, now_ms)
    except (KeyError, ValueError):   # a field missing or not an integer: the checked path says which
        send = None
    return send if send is not None else _parse_checked(request, now_ms)


# For ``_parse_plain``, by request code: the fields a plain send must carry (topic, queueId, sysFlag,
# bornTimestamp, flag, properties, reconsumeTimes: the Java and C++ clients send them all), and the
# keys of those it may leave out (batch, maxReconsumeTimes, defaultTopicQueueNums).
_PLAIN_FIELDS = {code: (itemgetter(*(keys[name] for name in ("topic", "queueId", "sysFlag", "bornTimestamp", "flag",
                                                             "properties", "reconsumeTimes"))),
                        keys["batch"], keys["maxReconsumeTimes"], keys["defaultTopicQueueNums"])
                 for code, keys in ((RequestCode.SEND_MESSAGE_V2, SEND_V2_LONG_NAMES),
                                    (RequestCode.SEND_MESSAGE, {name: name for name in SEND_FIELDS}))}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


@functools.lru_cache(maxsize=4096)
def _plain_topic(topic: str) -> bool:
    """Whether a send to ``topic`` passes ``_parse_checked``'s topic checks (the few topics a broker
    is sent to are checked once; the caller keeps names past the longest valid one out of the cache)."""
    return name_problem("topic", topic) is None and topic != AUTO_CREATE_TOPIC_KEY and not is_not_sendable_topic(topic)


def _parse_plain(request: Command, now_ms) -> SendRequest | None:
    """What ``_parse_checked`` makes of a plain single send (not a batch, half, delayed or priority
    message; every field there and an integer where one is read; the properties text plain, see
    ``split_property``), with WAIT cut from the text; None for anything else. The wire's numbers
    are read with int() as ``field_int`` reads them."""
    plain_fields = _PLAIN_FIELDS.get(request.code)
    if plain_fields is None:
        return None
    required, batch_key, reconsume_max_key, queue_count_key = plain_fields
    fields = request.fields
    topic, queue_text, sys_flag, born_ts, flag, text, reconsume_times = required(fields)
    batch = fields.get(batch_key)
    if (batch and batch.lower() in ("true", "1")) or len(topic) > NAME_LENGTH_MAX or not _plain_topic(topic) \
            or _HALF_MARK in text or _DELAY_MARK in text or _TIMER_MARKS_PREFIX in text or _PRIORITY_MARK in text \
            or "\x00" in text:
        return None
    sys_flag, born_ts, flag, reconsume_times = int(sys_flag), int(born_ts), int(flag), int(reconsume_times)
    if sys_flag & ~SEND_SYSFLAG_ALLOWED or not (0 <= born_ts < 1 << 62 and _INT32_MIN <= flag <= _INT32_MAX
                                                and 0 <= reconsume_times <= _INT32_MAX):
        return None
    wait_store, stored_text = True, None
    if _WAIT_MARK in text:
        cut = split_property(text, PROPERTY_WAIT)
        if cut is None:
            return None
        wait_store, stored_text = cut[0] != "false", cut[1]
    reconsume_max = fields.get(reconsume_max_key)
    return SendRequest(topic, int(queue_text), request.body, sys_flag, born_ts,
                       _born_host(request.peer_address, request.peer_port), text, None, False, False, False, flag,
                       reconsume_times, int(reconsume_max) if reconsume_max else None, wait_store,
                       fields.get(queue_count_key), stored_text)


def _parse_checked(request: Command, now_ms) -> SendRequest:
    """The header of a send, typed and checked: ProtocolError (MESSAGE_ILLEGAL, NO_PERMISSION) for what
    no broker state could make right. ``now_ms()``: the born time when the client sent none."""
    keys = _KEYS_OF_CODE.get(request.code, _LONG_KEYS)
    get = request.fields.get
    topic = get(keys["topic"], "")
    require_name("topic", topic, ResponseCode.MESSAGE_ILLEGAL)
    if topic == AUTO_CREATE_TOPIC_KEY:
        raise ProtocolError(f"the topic {topic} is reserved for auto-creation routes", ResponseCode.NO_PERMISSION)
    if is_not_sendable_topic(topic):
        # A record a client wrote there would be read as the broker's own: a forged pop checkpoint
        # would make the revive timer copy any stored record into the sender's retry topic.
        raise ProtocolError(f"the topic {topic} is the broker's own (delayed or half messages, or pop state, "
                            f"wait there) or reserved by RocketMQ", ResponseCode.NO_PERMISSION)
    sys_flag = field_int(request, "sysFlag", 0, keys["sysFlag"])
    if sys_flag & ~(SEND_SYSFLAG_ALLOWED | SYSFLAG_TRANSACTION_PREPARED):
        raise ProtocolError(f"sysFlag {sys_flag} has bits a send may not set (allowed: compressed 0x1, "
                            f"multi-tags 0x2, transaction prepared 0x4, compression type 0x700)",
                            ResponseCode.MESSAGE_ILLEGAL)
    born_key = keys["bornTimestamp"]
    born_ts = field_int(request, "bornTimestamp", 0, born_key) if get(born_key) else now_ms()
    if not 0 <= born_ts < 1 << 62:
        raise ProtocolError(f"bornTimestamp {born_ts} is out of range", ResponseCode.MESSAGE_ILLEGAL)
    text = get(keys["properties"], "")
    # C++ 1.2.x sends batch as "1"; Java as "true" (rocketmq-protocol.md 4.2).
    batch = request.code == RequestCode.SEND_BATCH_MESSAGE or (get(keys["batch"]) or "").lower() in ("true", "1")
    half = bool(sys_flag & SYSFLAG_TRANSACTION_PREPARED) or _HALF_MARK in text
    if half and batch:
        raise ProtocolError("a batch cannot be transactional", ResponseCode.MESSAGE_ILLEGAL)
    delayed = _DELAY_MARK in text or any(mark in text for mark in _TIMER_MARKS)
    properties = None
    flag = reconsume_times = 0
    if not batch:   # a batch's properties are its items', in its body
        if "\x00" in text:
            # Never part of "name\x01value\x02" pairs; recovery reads a trailing NUL as a torn write.
            raise ProtocolError("the properties contain a NUL byte", ResponseCode.MESSAGE_ILLEGAL)
        flag = field_int(request, "flag", 0, keys["flag"])
        reconsume_times = field_int(request, "reconsumeTimes", 0, keys["reconsumeTimes"])
        if not (-(1 << 31) <= flag < 1 << 31 and 0 <= reconsume_times < 1 << 31):
            raise ProtocolError("flag or reconsumeTimes is out of the int32 range", ResponseCode.MESSAGE_ILLEGAL)
        if half or delayed or _WAIT_MARK in text:
            properties = decode_properties(text.encode())
    reconsume_max = get(keys["maxReconsumeTimes"])
    return SendRequest(
        topic, field_int(request, "queueId", -1, keys["queueId"]), request.body, sys_flag, born_ts,
        _born_host(request.peer_address, request.peer_port), text, properties, batch, half, delayed, flag,
        reconsume_times,
        field_int(request, "maxReconsumeTimes", 0, keys["maxReconsumeTimes"]) if reconsume_max else None,
        batch or properties is None or properties.get(PROPERTY_WAIT) != "false",
        get(keys["defaultTopicQueueNums"]))


def _queue_count(text: str | None, default: int) -> int:
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ProtocolError(f"the header field 'defaultTopicQueueNums' is not an integer: {text!r}") from None


@dataclass(slots=True)
class _DeferredSend:
    """A send checked and routed, its put left to the end of its read (``SendProcessor._store_deferred``)."""
    request: Command
    reply: object
    topic: str
    queue_id: int
    store_topic: str
    store_queue: int
    message: MessageToStore
    message_type: str
    wait_store: bool


def _by_queue(deferred: list) -> list[list[int]]:
    """The indexes of ``deferred`` grouped by where they are stored (and how they are counted), each
    group in arrival order."""
    groups: dict[tuple, list[int]] = {}
    for index, one in enumerate(deferred):
        groups.setdefault((one.store_topic, one.store_queue, one.topic, one.message_type), []).append(index)
    return list(groups.values())


def _stored(send: _DeferredSend, msg_id: str, queue_offset: int) -> Command:
    """SEND_OK for a deferred send stored at ``queue_offset`` of its store queue (its place in its
    own topic, unknown until delivery when it went elsewhere: -1)."""
    return send.request.response(ResponseCode.SUCCESS, {
        "msgId": msg_id, "queueId": str(send.queue_id),
        "queueOffset": str(queue_offset if send.store_topic == send.topic else -1)})


class SendProcessor:
    def __init__(self, ctx: BrokerContext, schedule, transactions):
        self.cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.groups = ctx.groups
        self.clock = ctx.clock
        self.schedule = schedule
        self.transactions = transactions
        self.durability = ctx.durability
        self.flush_waiters = ctx.durability.flush_waiters
        self.may_write = ctx.may_write
        self.on_written = ctx.on_written
        self.publish_topics = ctx.publish_topics
        self.ensure_system_topic = ctx.ensure_system_topic
        self.round_robin_next = 0   # the queue of the next send that leaves the choice to the broker
        self.messages_stored = 0
        self.traffic_in = InTraffic()   # per topic and message type (metrics)
        self.cluster_mark = property_mark(PROPERTY_CLUSTER, ctx.cfg.cluster_name)
        self._deferred: list[_DeferredSend] = []   # sends of the current read, stored at its end

    @answers_refusals
    def on_send(self, request: Command, reply) -> Command | None:
        self._require_writable()
        if len(self.flush_waiters):
            busy = self._store_busy(request)
            if busy is not None:
                return busy
        send = parse(request, self.clock.now_ms)
        size_max = self.cfg.store.message_size_bytes_max
        if len(send.body) > size_max:
            raise ProtocolError(f"the message body is {len(send.body)} bytes, more than the {size_max}-byte limit",
                                ResponseCode.MESSAGE_ILLEGAL)
        refused = self.durability.refusal() if send.wait_store else None
        if refused:
            raise ProtocolError(refused, ResponseCode.SYSTEM_ERROR)
        topic = send.topic
        queue_id = self._queue_of(send)
        if _PRIORITY_MARK in send.properties_text and not send.batch and not topic.startswith(RETRY_TOPIC_PREFIX):
            queue_id = self._priority_queue(send, queue_id)
        if send.batch:
            self._store_deferred()
            result = self.store.put_messages(topic, queue_id, BatchBody(send.body, send.sys_flag, send.born_timestamp_ms,
                                                                        send.born_host))
            if result.status == PutStatus.MESSAGE_ILLEGAL:
                raise ProtocolError("malformed batch body: its items do not add up", ResponseCode.MESSAGE_ILLEGAL)
            message_type = "normal"
        else:
            store_topic, store_queue, properties, sys_flag, message_type = self._route(send, queue_id)
            message = MessageToStore(body=send.body, flag=send.flag, properties=properties, sys_flag=sys_flag,
                                     born_timestamp_ms=send.born_timestamp_ms, born_host=send.born_host,
                                     reconsume_times=send.reconsume_times)
            if request.read_pass is not None and not send.half and store_topic != SCHEDULE_TOPIC:
                # Stored with the read's other sends at its end (_store_deferred): one put a queue.
                if not self._deferred:
                    request.read_pass.defer(self, self._store_deferred)
                self._deferred.append(_DeferredSend(request, reply, topic, queue_id, store_topic, store_queue,
                                                    message, message_type, send.wait_store))
                return None
            self._store_deferred()   # the read's earlier sends first: a queue keeps their order
            result = self.store.put_messages(store_topic, store_queue, (message,))
            if store_topic not in (topic, HALF_TOPIC) and result.status == PutStatus.PUT_OK:
                result = result._replace(queue_offset=-1)   # its place in the topic is known on delivery
        if result.status != PutStatus.PUT_OK:
            return self._refused(request, topic, result.status)
        self.messages_stored += result.count
        self.traffic_in.add(topic, message_type, result.count, result.end_phys_offset - result.phys_offset)
        if send.half:
            self.transactions.opened(topic, send.properties)
        self.on_written()
        response = request.response(ResponseCode.SUCCESS, {
            "msgId": result.msg_ids_text,
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
        })
        if send.delayed and not send.batch and store_topic == SCHEDULE_TOPIC:
            handle = self._recall_handle(send, properties)
            if handle:
                response.fields["recallHandle"] = handle
        if not send.wait_store:
            return response
        return self.durability.answer(response, result.end_phys_offset, reply)

    def _store_deferred(self) -> None:
        """The sends a read deferred (``on_send``), checked and routed each: one put for the sends
        of each queue, in their order, then their answers after one durability wait. A put the
        store refuses is tried again one message at a time, so each send gets its own answer."""
        deferred, self._deferred = self._deferred, []
        if not deferred:
            return
        answers: list = [None] * len(deferred)
        end = -1
        try:
            for indexes in _by_queue(deferred):
                group = [deferred[i] for i in indexes]
                result = self._put_together(group)
                if result.status == PutStatus.PUT_OK:   # the group's records follow each other in its queue
                    end = max(end, result.end_phys_offset)
                    ids = result.msg_ids_text.split(",") if len(group) > 1 else (result.msg_ids_text,)
                    for k, index in enumerate(indexes):
                        answers[index] = _stored(group[k], ids[k], result.queue_offset + k)
                    continue
                for index, one in zip(indexes, group):   # refused together: each alone, for its own answer
                    result = self._put_together([one]) if len(group) > 1 else result
                    if result.status != PutStatus.PUT_OK:
                        answers[index] = self._refused(one.request, one.topic, result.status)
                        continue
                    end = max(end, result.end_phys_offset)
                    answers[index] = _stored(one, result.msg_ids_text, result.queue_offset)
        except Exception as exc:   # a bug here must not leave a client waiting for its answer
            _limited.error("deferred-sends", "storing the sends of a read failed", exc_info=True)
            for index, one in enumerate(deferred):
                if answers[index] is None:
                    answers[index] = one.request.response(ResponseCode.SYSTEM_ERROR,
                                                          remark=f"{type(exc).__name__}: {exc}")
        if end >= 0:
            self.on_written()
        waiting = []
        for one, response in zip(deferred, answers):
            if response.code == ResponseCode.SUCCESS and one.wait_store and self.durability.waits:
                waiting.append((response, one.reply))
            else:
                one.reply(response)
        if waiting:
            self.durability.answer_together(waiting, end)

    def _put_together(self, group: list):
        """One put for ``group`` (sends to one queue), counted when stored: its ``PutResult``."""
        first = group[0]
        result = self.store.put_messages(first.store_topic, first.store_queue, tuple(one.message for one in group))
        if result.status == PutStatus.PUT_OK:
            self.messages_stored += len(group)
            self.traffic_in.add(first.topic, first.message_type, len(group),
                                result.end_phys_offset - result.phys_offset)
        return result

    # ------------------------------------------------------------ the steps

    def _require_writable(self) -> None:
        if self.cfg.is_slave:
            raise ProtocolError(f"broker {self.cfg.broker_name} id {self.cfg.broker_id} is a slave: it takes no "
                                f"sends", ResponseCode.SERVICE_NOT_AVAILABLE)
        if not self.may_write():
            raise ProtocolError(f"broker {self.cfg.broker_name} is not sure it is still master (its controller "
                                f"lease lapsed): it takes no sends", ResponseCode.SERVICE_NOT_AVAILABLE)

    def _queue_of(self, send: SendRequest) -> int:
        """The queue the send goes to, its topic made on first use when auto-create is on."""
        topic = send.topic
        topic_cfg = self.topics.get(topic)
        if topic_cfg is None:
            topic_cfg = self.topics.create_on_send(topic, _queue_count(send.default_queue_text,
                                                                       self.cfg.client_topic_queue_count_default))
            if topic_cfg is None:
                raise ProtocolError(f"topic {topic} does not exist and auto-create is off",
                                    ResponseCode.TOPIC_NOT_EXIST)
            _limited.info("auto-created", "auto-created topic %s with %d queues", topic, topic_cfg.writeQueueNums)
            self.publish_topics()
        if not topic_cfg.perm & PERM_WRITE:
            raise ProtocolError(f"topic {topic} is not writable on this broker", ResponseCode.NO_PERMISSION)
        queue_id = send.queue_id
        if queue_id >= topic_cfg.writeQueueNums:
            raise ProtocolError(f"queue {queue_id} does not exist: topic {topic} has "
                                f"{topic_cfg.writeQueueNums} write queues", ResponseCode.MESSAGE_ILLEGAL)
        if queue_id < 0:  # the client left the choice to the broker
            queue_id = self.round_robin_next % topic_cfg.writeQueueNums
            self.round_robin_next += 1
        return queue_id

    def _priority_queue(self, send: SendRequest, queue_id: int) -> int:
        """RocketMQ 5.4's SendMessageProcessor (RIP-80): a priority message (by its properties, whatever
        the topic declares) goes to the queue of its priority, capped at the last write queue, so a
        PRIORITY topic's pops can serve the higher queues first; a message of another type (half,
        delayed, FIFO) loses the property. A value that is no integer >= 0 leaves the queue as it was."""
        props = send.properties if send.properties is not None else decode_properties(send.properties_text.encode())
        value = props.get(PROPERTY_PRIORITY, "")
        if not (value.isascii() and value.isdigit() and int(value) < 1 << 31):   # Java's Integer.parseInt
            return queue_id
        priority = int(value)
        if not (send.half or send.delayed or _SHARDING_KEY_MARK in send.properties_text):
            return min(priority, self.topics.get(send.topic).writeQueueNums - 1)
        props = {k: v for k, v in props.items() if k != PROPERTY_PRIORITY}
        send.properties = props
        send.properties_text = encode_properties(props).decode()
        return queue_id

    def _route(self, send: SendRequest, queue_id: int) -> tuple[str, int, bytes, int, str]:
        """Where a single message is stored and as what: (topic, queue, properties, sysFlag, message type)."""
        topic, props = send.topic, send.properties
        if send.half:
            # Invisible until END_TRANSACTION commits it; stored as a plain record of the half topic.
            properties = self.transactions.half_message(topic, queue_id, self._with_cluster(props))
            return HALF_TOPIC, 0, properties, send.sys_flag & ~SYSFLAG_TRANSACTION_MASK, "transaction"
        if send.delayed:
            return self._park(send, queue_id)
        if topic.startswith(RETRY_TOPIC_PREFIX):
            topic, queue_id = self._retry_or_dead_letter(send, topic, queue_id)
        text = send.stored_text + self.cluster_mark if send.stored_text is not None else \
            stored_send_properties(send.properties_text, self.cluster_mark, True, props)
        message_type = "fifo" if _SHARDING_KEY_MARK in send.properties_text else \
            "priority" if _PRIORITY_MARK in send.properties_text else "normal"
        return topic, queue_id, text.encode(), send.sys_flag, message_type

    def _with_cluster(self, props: dict[str, str]) -> dict[str, str]:
        # The later pair wins, as when CLUSTER is appended to the text (stored_send_properties).
        return {**props, PROPERTY_CLUSTER: self.cfg.cluster_name}

    def _park(self, send: SendRequest, queue_id: int) -> tuple[str, int, bytes, int, str]:
        """Where a message with DELAY or a timer property is stored (in SCHEDULE_TOPIC while it waits)."""
        props = send.properties
        if PROPERTY_DELAY in props and is_timed(props):
            raise ProtocolError("a message has a delay level or a delivery time, not both",
                                ResponseCode.MESSAGE_ILLEGAL)
        try:
            schedule_queue, parked = self.schedule.park(self._with_cluster(props), send.topic, queue_id)
        except ValueError:
            raise ProtocolError(f"{PROPERTY_DELAY} and the timer properties ({', '.join(TIMER_PROPERTIES)}) must be "
                                f"integers", ResponseCode.MESSAGE_ILLEGAL) from None
        if schedule_queue is None:   # due now: stored as sent (WAIT kept, as RocketMQ writes it again)
            text = stored_send_properties(send.properties_text, self.cluster_mark, False)
            return send.topic, queue_id, text.encode(), send.sys_flag, "normal"
        return SCHEDULE_TOPIC, schedule_queue, encode_properties(parked), send.sys_flag, "delay"

    def _recall_handle(self, send: SendRequest, stored_properties: bytes) -> str | None:
        """The recall handle a parked timed message's send answers (RocketMQ's attachRecallHandle: not for
        a delay level, nor a message bound for a retry topic)."""
        if not is_timed(send.properties) or send.topic.startswith(RETRY_TOPIC_PREFIX):
            return None
        parked = decode_properties(stored_properties)
        message_id = parked.get(PROPERTY_UNIQ_KEY)
        if PROPERTY_TIMER_OUT_MS not in parked or not message_id:
            return None
        return recall_handle.build(send.topic, self.cfg.broker_name, int(parked[PROPERTY_TIMER_OUT_MS]) + 1,
                                   message_id)

    def _retry_or_dead_letter(self, send: SendRequest, topic: str, queue_id: int) -> tuple[str, int]:
        """A send to a group's retry topic (a consumer whose CONSUMER_SEND_MSG_BACK failed resends the
        message so) goes to its dead-letter topic once it was consumed the group's maximum times, as
        RocketMQ's SendMessageProcessor.handleRetryTopic routes it."""
        group = topic[len(RETRY_TOPIC_PREFIX):]
        reconsume_max = send.reconsume_max if send.reconsume_max is not None else self.groups.retry_max_times(group)
        if send.reconsume_times < reconsume_max:
            return topic, queue_id
        dead_letters = DLQ_TOPIC_PREFIX + group
        self.ensure_system_topic(dead_letters)
        _limited.info("dead-letter", "a message sent to %s goes to %s after %d attempts", topic, dead_letters,
                      send.reconsume_times)
        return dead_letters, 0

    def _refused(self, request: Command, topic: str, status: PutStatus) -> Command:
        code = _PUT_STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
        remark = f"store refused the message: {status.name}"
        if status == PutStatus.DISK_FULL:
            remark = "the disk under the store is full: writes are refused until space returns"
        _limited.warning("send-refused", "send to %s refused: %s", topic, remark)
        return request.response(code, remark=remark)

    def _store_busy(self, request: Command) -> Command | None:
        """SYSTEM_BUSY while the disk flush is behind (sync flush), as RocketMQ answers while its store
        is (osPageCacheBusy, sendThreadPoolQueue full); None when the send may go on. Taking more
        would only lengthen every waiter's wait and hold their bytes."""
        waiters = self.flush_waiters
        capacity = self.cfg.send_queue_capacity
        now = time.monotonic()
        # The longer of how long the oldest has waited and how long a send taken now would wait.
        waited_s = max(waiters.oldest_wait_s(now), waiters.flush_wait_s(self.store.commitlog.write_pos))
        if len(waiters) >= capacity:
            remark = (f"[OVERLOAD]system busy, start flow control for a while: {len(waiters)} sends wait for the "
                      f"disk flush (sendThreadPoolQueueCapacity {capacity})")
        elif waited_s * 1000 > self.cfg.os_page_cache_busy_timeout_ms:
            remark = (f"[PC_SYNCHRONIZED]broker busy, start flow control for a while: the disk flush is "
                      f"{int(waited_s * 1000)} ms behind (osPageCacheBusyTimeOutMills "
                      f"{self.cfg.os_page_cache_busy_timeout_ms})")
        else:
            return None
        _limited.warning("store-busy", "sends refused: %s", remark)
        return request.response(ResponseCode.SYSTEM_BUSY, remark=remark)
