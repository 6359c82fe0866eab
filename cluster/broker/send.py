"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: validate, store, answer per flush policy."""

from __future__ import annotations

import functools
import itertools
import logging
import time

from rocketbox.cluster.config import SYNC_FLUSH, SYNC_MASTER, BrokerConfig
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (answers_refusals, field_int, require_name, PERM_WRITE, ProtocolError,
                                        RequestCode, ResponseCode, SEND_FIELDS, SEND_V2_LONG_NAMES)
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY, SCHEDULE_TOPIC, is_not_sendable_topic
from rocketbox.cluster.broker.meters import InTraffic
from rocketbox.cluster.broker.transaction import HALF_TOPIC
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import (PROPERTY_CLUSTER, PROPERTY_DELAY, PROPERTY_SEPARATOR,
                                                  PROPERTY_TIMER_DELIVER_MS, PROPERTY_TRAN_MSG, PROPERTY_WAIT,
                                                  decode_properties, encode_properties, property_mark)
from rocketbox.cluster.message.sysflags import (SYSFLAG_COMPRESSED, SYSFLAG_COMPRESSION_TYPE_MASK, SYSFLAG_MULTI_TAGS,
                                                SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED)
from rocketbox.cluster.shm.store import MessageToStore, PutMessageStatus as PutStatus
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


def stored_send_properties(properties_text: str, cluster_mark: str, drop_wait: bool) -> str:
    """What a single send's properties are stored as, as RocketMQ's SendMessageProcessor stores them:
    CLUSTER (the broker's cluster) added, so a responder can address a reply (MessageUtil.createReplyMessage
    reads it), and, unless ``drop_wait`` is false, WAIT left out (RocketMQ: "no need to store WAIT=true";
    a delayed or half message keeps it, since RocketMQ writes those properties again with WAIT back in).
    ``cluster_mark`` is ``CLUSTER\x01<name>\x02``; a CLUSTER the client sent is overruled (the later pair wins)."""
    if drop_wait and _WAIT_MARK in properties_text and (
            properties_text.startswith(_WAIT_MARK) or _WAIT_PAIR_START in properties_text):
        properties = decode_properties(properties_text.encode())
        properties.pop(PROPERTY_WAIT, None)
        properties_text = encode_properties(properties).decode()
    if properties_text and not properties_text.endswith(PROPERTY_SEPARATOR):
        properties_text += PROPERTY_SEPARATOR
    return properties_text + cluster_mark


_DELAY_MARK = property_mark(PROPERTY_DELAY)
_TIMER_MARK = property_mark(PROPERTY_TIMER_DELIVER_MS)
_HALF_MARK = property_mark(PROPERTY_TRAN_MSG, "true")
# Only a properties text holding this may ask not to wait for the store: the rest skip decoding it.
_WAIT_FALSE = property_mark(PROPERTY_WAIT, "false")
_WAIT_MARK = property_mark(PROPERTY_WAIT)
_WAIT_PAIR_START = PROPERTY_SEPARATOR + _WAIT_MARK
# RocketMQ 5 marks a FIFO message by its sharding key (the message_type label "fifo").
_SHARDING_KEY_MARK = property_mark("__SHARDINGKEY")

# The key each header field is read by: SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry RocketMQ's
# one-letter names (SendMessageRequestHeaderV2, as the ACL check reads them), SEND_MESSAGE the long ones.
_LONG_KEYS = {name: name for name in SEND_FIELDS}
_KEYS_OF_CODE = {RequestCode.SEND_MESSAGE_V2: SEND_V2_LONG_NAMES, RequestCode.SEND_BATCH_MESSAGE: SEND_V2_LONG_NAMES}


class _Outcome:
    """One wait's result, in the shape ``HAServer.await_replica`` sets on a response."""
    __slots__ = ("code", "remark")

    def __init__(self, code: int = ResponseCode.SUCCESS, remark: str = ""):
        self.code = code
        self.remark = remark


_FLUSHED = _Outcome()


class _BothDone:
    """Answers ``response`` once ``parts`` waits are done, with the disk's failure first, else the slave's."""
    __slots__ = ("response", "reply", "left", "failure")

    def __init__(self, response: Command, reply, parts: int):
        self.response = response
        self.reply = reply
        self.left = parts
        self.failure: _Outcome | None = None

    def done(self, outcome: _Outcome) -> None:
        if outcome.code != ResponseCode.SUCCESS and (
                self.failure is None or outcome.code == ResponseCode.FLUSH_DISK_TIMEOUT):
            self.failure = outcome
        self.left -= 1
        if self.left == 0:
            if self.failure is not None:
                self.response.code, self.response.remark = self.failure.code, self.failure.remark
            self.reply(self.response)


class SendProcessor:
    def __init__(self, cfg: BrokerConfig, store, topics, clock, schedule, transactions, ha, flush_waiters,
                 may_write, on_written, publish_topics):
        """``may_write()``: whether this broker may take writes now; ``on_written()``: records were
        appended (wakes dispatch); ``publish_topics()``: tell the NameServers the topic table changed."""
        self.cfg = cfg
        self.store = store
        self.topics = topics
        self.clock = clock
        self.schedule = schedule
        self.transactions = transactions
        self.ha = ha
        self.flush_waiters = flush_waiters
        self.may_write = may_write
        self.on_written = on_written
        self.publish_topics = publish_topics
        self.sync_flush = self.cfg.store.flush_mode == SYNC_FLUSH
        self.sync_replication = self.cfg.broker_role == SYNC_MASTER
        self._round_robin = itertools.count()
        self.messages_stored = 0
        self.traffic_in = InTraffic()   # per topic and message type (metrics)
        self.cluster_mark = property_mark(PROPERTY_CLUSTER, cfg.cluster_name)

    def _park(self, topic: str, queue_id: int, properties_text: str) -> tuple[str, int, bytes]:
        """Where a message with DELAY or TIMER_DELIVER_MS is stored: (topic, queue, properties)."""
        props = decode_properties(properties_text.encode())
        if props.get(PROPERTY_TRAN_MSG) == "true":
            raise ProtocolError("a message is delayed or transactional, not both", ResponseCode.MESSAGE_ILLEGAL)
        if PROPERTY_DELAY in props and PROPERTY_TIMER_DELIVER_MS in props:
            raise ProtocolError("a message has a delay level or a delivery time, not both",
                                ResponseCode.MESSAGE_ILLEGAL)
        try:
            schedule_queue = self.schedule.plan(props)
        except ValueError:
            raise ProtocolError("DELAY and TIMER_DELIVER_MS must be integers", ResponseCode.MESSAGE_ILLEGAL) from None
        if schedule_queue is None:
            return topic, queue_id, properties_text.encode()
        parked = self.schedule.parked_properties(props, topic, queue_id)
        return SCHEDULE_TOPIC, schedule_queue, encode_properties(parked)

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

    @answers_refusals
    def on_send(self, request: Command, reply) -> Command | None:
        if self.cfg.is_slave:
            raise ProtocolError(f"broker {self.cfg.broker_name} id {self.cfg.broker_id} is a slave: it takes no "
                                f"sends", ResponseCode.SERVICE_NOT_AVAILABLE)
        if not self.may_write():
            raise ProtocolError(f"broker {self.cfg.broker_name} is not sure it is still master (its controller "
                                f"lease lapsed): it takes no sends", ResponseCode.SERVICE_NOT_AVAILABLE)
        if len(self.flush_waiters):
            busy = self._store_busy(request)
            if busy is not None:
                return busy
        keys = _KEYS_OF_CODE.get(request.code, _LONG_KEYS)
        get = request.fields.get
        topic = get(keys["topic"], "")
        require_name("topic", topic, ResponseCode.MESSAGE_ILLEGAL)
        if topic == AUTO_CREATE_TOPIC_KEY:
            raise ProtocolError(f"the topic {topic} is reserved for auto-creation routes",
                                ResponseCode.NO_PERMISSION)
        if is_not_sendable_topic(topic):
            # A record a client wrote there would be read as the broker's own: a forged pop checkpoint
            # would make the revive timer copy any stored record into the sender's retry topic.
            raise ProtocolError(f"the topic {topic} is the broker's own (delayed or half messages, or pop state, "
                                f"wait there) or reserved by RocketMQ", ResponseCode.NO_PERMISSION)
        body = request.body
        size_max = self.cfg.store.message_size_bytes_max
        if len(body) > size_max:
            raise ProtocolError(f"the message body is {len(body)} bytes, more than the {size_max}-byte limit",
                                ResponseCode.MESSAGE_ILLEGAL)
        topic_cfg = self.topics.get(topic)
        if topic_cfg is None:
            topic_cfg = self.topics.create_on_send(
                topic, field_int(request, "defaultTopicQueueNums", self.cfg.client_topic_queue_count_default,
                                 keys["defaultTopicQueueNums"]))
            if topic_cfg is None:
                raise ProtocolError(f"topic {topic} does not exist and auto-create is off",
                                    ResponseCode.TOPIC_NOT_EXIST)
            _limited.info("auto-created", "auto-created topic %s with %d queues", topic, topic_cfg.writeQueueNums)
            self.publish_topics()
        if not topic_cfg.perm & PERM_WRITE:
            raise ProtocolError(f"topic {topic} is not writable on this broker", ResponseCode.NO_PERMISSION)
        queue_id = field_int(request, "queueId", -1, keys["queueId"])
        if queue_id >= topic_cfg.writeQueueNums:
            raise ProtocolError(f"queue {queue_id} does not exist: topic {topic} has "
                                f"{topic_cfg.writeQueueNums} write queues", ResponseCode.MESSAGE_ILLEGAL)
        if queue_id < 0:  # the client left the choice to the broker
            queue_id = next(self._round_robin) % topic_cfg.writeQueueNums
        sys_flag = field_int(request, "sysFlag", 0, keys["sysFlag"])
        if sys_flag & ~(SEND_SYSFLAG_ALLOWED | SYSFLAG_TRANSACTION_PREPARED):
            raise ProtocolError(f"sysFlag {sys_flag} has bits a send may not set (allowed: compressed 0x1, "
                                f"multi-tags 0x2, transaction prepared 0x4, compression type 0x700)",
                                ResponseCode.MESSAGE_ILLEGAL)
        born_key = keys["bornTimestamp"]
        born_ts = field_int(request, "bornTimestamp", 0, born_key) if get(born_key) else self.clock.now_ms()
        if not 0 <= born_ts < 1 << 62:
            raise ProtocolError(f"bornTimestamp {born_ts} is out of range", ResponseCode.MESSAGE_ILLEGAL)
        born_host = _born_host(request.peer_address, request.peer_port)
        properties_text = get(keys["properties"], "")
        # C++ 1.2.x sends batch as "1"; Java as "true" (rocketmq-protocol.md 4.2).
        is_batch = request.code == RequestCode.SEND_BATCH_MESSAGE or (get(keys["batch"]) or "").lower() in ("true", "1")
        # The WAIT property "false" asks not to wait for the store (RocketMQ's waitStoreMsgOK).
        wait_store = is_batch or _WAIT_FALSE not in properties_text or \
            decode_properties(properties_text.encode()).get(PROPERTY_WAIT) != "false"
        half = bool(sys_flag & SYSFLAG_TRANSACTION_PREPARED) or _HALF_MARK in properties_text
        message_type = "transaction" if half else "normal"
        if half and is_batch:
            raise ProtocolError("a batch cannot be transactional", ResponseCode.MESSAGE_ILLEGAL)
        if is_batch:
            result = self.store.put_batch_body(topic, queue_id, body, sys_flag=sys_flag,
                                               born_timestamp_ms=born_ts, born_host=born_host)
            if result.status == PutStatus.MESSAGE_ILLEGAL:
                raise ProtocolError("malformed batch body: its items do not add up", ResponseCode.MESSAGE_ILLEGAL)
        else:
            if "\x00" in properties_text:
                # Never part of "name\x01value\x02" pairs; recovery reads a trailing NUL as a torn write.
                raise ProtocolError("the properties contain a NUL byte", ResponseCode.MESSAGE_ILLEGAL)
            flag = field_int(request, "flag", 0, keys["flag"])
            reconsume_times = field_int(request, "reconsumeTimes", 0, keys["reconsumeTimes"])
            if not (-(1 << 31) <= flag < 1 << 31 and 0 <= reconsume_times < 1 << 31):
                raise ProtocolError("flag or reconsumeTimes is out of the int32 range", ResponseCode.MESSAGE_ILLEGAL)
            store_topic, store_queue = topic, queue_id
            delayed = _DELAY_MARK in properties_text or _TIMER_MARK in properties_text
            properties_text = stored_send_properties(properties_text, self.cluster_mark, not (half or delayed))
            properties = properties_text.encode()
            if half:
                # Invisible until END_TRANSACTION commits it; stored as a plain record of the half topic.
                properties = self.transactions.half_message(
                    topic, queue_id, decode_properties(properties_text.encode()))
                store_topic, store_queue, sys_flag = HALF_TOPIC, 0, sys_flag & ~SYSFLAG_TRANSACTION_MASK
            elif delayed:
                store_topic, store_queue, properties = self._park(topic, queue_id, properties_text)
                message_type = "delay" if store_topic == SCHEDULE_TOPIC else message_type
            elif _SHARDING_KEY_MARK in properties_text:
                message_type = "fifo"
            message = MessageToStore(body=body, flag=flag, properties=properties,
                                     sys_flag=sys_flag, born_timestamp_ms=born_ts, born_host=born_host,
                                     reconsume_times=reconsume_times)
            result = self.store.put_message(store_topic, store_queue, message)
            if store_topic not in (topic, HALF_TOPIC) and result.status == PutStatus.PUT_OK:
                result = result._replace(queue_offset=-1)   # its place in the topic is known on delivery
        if result.status != PutStatus.PUT_OK:
            code = _PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
            remark = f"store refused the message: {result.status.name}"
            if result.status == PutStatus.DISK_FULL:
                remark = "the disk under the store is full: writes are refused until space returns"
            _limited.warning("send-refused", "send to %s refused: %s", topic, remark)
            return request.response(code, remark=remark)
        self.messages_stored += result.count
        self.traffic_in.add(topic, message_type, result.count, result.end_phys_offset - result.phys_offset)
        if half:
            self.transactions.opened(topic, properties_text)
        self.on_written()
        response = request.response(ResponseCode.SUCCESS, {
            "msgId": result.msg_ids_text,
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
        })
        if not wait_store:
            return response
        end = result.end_phys_offset
        replicate = self.sync_replication
        if not self.sync_flush:
            return self.ha.await_replica(end, response, reply) if replicate else response
        deadline = time.monotonic() + self.cfg.store.flush_sync_timeout_ms / 1000
        # Disk and slave are waited for at once (as RocketMQ 5 does), not one after the other:
        # the answer goes when the later of the two is done.
        both = _BothDone(response, reply, 2 if replicate else 1)
        flush_timeout = _Outcome(ResponseCode.FLUSH_DISK_TIMEOUT,
                                 f"not flushed within {self.cfg.store.flush_sync_timeout_ms} ms")
        self.flush_waiters.park(end, deadline, lambda: both.done(_FLUSHED), lambda: both.done(flush_timeout),
                                deadline - self.cfg.store.flush_sync_timeout_ms / 1000)
        if replicate:
            replica = _Outcome()
            if self.ha.await_replica(end, replica, both.done) is not None:
                both.done(replica)
        return None
