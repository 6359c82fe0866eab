"""Messages between the two protocols (rocketmq-protocol.md §7.4, RocketMQ's GrpcConverter and
SendMessageActivity): a gRPC ``Message`` becomes a record's properties, body and sysFlag for
SEND_MESSAGE_V2, and a stored record (as a pull or pop answer carries it) becomes a gRPC
``Message``. One store serves both doors, so a message sent by one kind of client reads the same
from another.
"""

from __future__ import annotations

import functools
import hashlib
import time
import zlib

from google.protobuf.timestamp_pb2 import Timestamp

from rocketbox.cluster import topic_attributes
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.protos import Code, pb
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import ProxyError
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import unpack_host
from rocketbox.cluster.message.lite_topics import PROPERTY_INNER_MULTI_DISPATCH, lite_topic_of, lmq_name
from rocketbox.cluster.message.properties import (SYSTEM_PROPERTIES, PROPERTY_KEYS, PROPERTY_PRIORITY, PROPERTY_TAGS,
                                                  PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELIVER_MS,
                                                  PROPERTY_TRAN_MSG, PROPERTY_UNIQ_KEY, properties_text)
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_PREPARED
from rocketbox.cluster.message.compression import inflate

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
INT32_MAX = (1 << 31) - 1

_GRPC_TYPES = {topic_attributes.NORMAL: pb.NORMAL, topic_attributes.FIFO: pb.FIFO,
               topic_attributes.DELAY: pb.DELAY, topic_attributes.TRANSACTION: pb.TRANSACTION,
               topic_attributes.PRIORITY: pb.PRIORITY, topic_attributes.LITE: pb.LITE}
_TYPE_NAMES = {value: name for name, value in _GRPC_TYPES.items()}


def grpc_type(type_name: str) -> int:
    return _GRPC_TYPES[type_name]


def type_name(grpc_message_type: int) -> str | None:
    return _TYPE_NAMES.get(grpc_message_type)


def millis(timestamp: Timestamp) -> int:
    return timestamp.seconds * 1000 + timestamp.nanos // 1_000_000


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


# ---------------------------------------------------------------- gRPC -> store

class Outgoing:
    """One gRPC message made ready for SEND_MESSAGE_V2."""

    __slots__ = ("message_id", "body", "properties", "properties_text", "sys_flag", "born_ms", "reconsume_times",
                 "type_name", "message_group", "lite_topic")

    def __init__(self, message_id, body, properties, sys_flag, born_ms, reconsume_times, type_name, message_group,
                 lite_topic="", text: str | None = None):
        self.lite_topic = lite_topic
        self.message_id = message_id
        self.body = body
        self.properties = properties
        # Built once: the size check and SEND_MESSAGE_V2's header both need it.
        self.properties_text = properties_text(properties.items()) if text is None else text
        self.sys_flag = sys_flag
        self.born_ms = born_ms
        self.reconsume_times = reconsume_times
        self.type_name = type_name
        self.message_group = message_group


def outgoing(message, settings: ProxySettings, now_ms: int, peer_host: str = "") -> Outgoing:
    """Checks ``message`` as Apache's proxy does and builds what the broker stores; ProxyError if refused."""
    system = message.system_properties
    body = message.body
    if system.body_encoding == pb.GZIP:
        try:
            # Stored inflated: every reader (the native client inflates zlib only) then gets the bytes.
            body = zlib.decompress(body, 47)   # 32 + 15: a gzip or zlib header, told apart by itself
        except zlib.error as exc:
            raise ProxyError(Code.MESSAGE_CORRUPTED, f"the body is marked GZIP but does not inflate: {exc}") from None
    if not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > settings.max_body_size:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE,
                         f"message body cannot exceed the max {settings.max_body_size} (it is {len(body)} bytes)")
    properties = dict(message.user_properties)
    size = validation.user_properties(properties, settings.max_user_properties) if properties else 0
    tag = validation.tag(system.tag)
    if tag:
        properties[PROPERTY_TAGS] = tag
        size += len(tag.encode())
    if system.keys:
        keys = [validation.message_key(key) for key in system.keys]
        properties[PROPERTY_KEYS] = " ".join(keys)
        size += sum(len(key.encode()) for key in keys)
    if size > settings.max_user_property_bytes:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"the total size of user property is too large, "
                                                            f"max is {settings.max_user_property_bytes}")
    message_id = system.message_id
    if not message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    if has_bad_id_characters(message_id):
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot contain control characters or spaces")
    properties[PROPERTY_UNIQ_KEY] = message_id
    # What the message is (``topic_attributes.message_type_of``'s order), told by the fields that set
    # its properties: no user property may be a system one (``validation.user_properties``).
    sys_flag, kind = 0, None
    if system.message_type == pb.TRANSACTION:
        properties[PROPERTY_TRAN_MSG] = "true"
        sys_flag |= SYSFLAG_TRANSACTION_PREPARED
        kind = topic_attributes.TRANSACTION
    if system.HasField("delivery_timestamp"):
        deliver_ms = millis(system.delivery_timestamp)
        if deliver_ms - now_ms > settings.max_delay_ms:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is {settings.max_delay_ms} ms")
        properties[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        kind = kind or topic_attributes.DELAY
    if system.HasField("priority"):
        # Apache's Message.setPriority refuses a negative one (its proxy then answers INTERNAL_SERVER_ERROR;
        # the client's fault is BAD_REQUEST here). No upper bound: the broker caps it at its last queue.
        if system.priority < 0:
            raise ProxyError(Code.BAD_REQUEST, "The priority must be greater than or equal to 0")
        properties[PROPERTY_PRIORITY] = str(system.priority)
    group = validation.message_group(system.message_group, settings.max_message_group_bytes)
    if group:
        properties[PROPERTY_SHARDING_KEY] = group
        kind = kind or topic_attributes.FIFO
    if kind is None:
        kind = topic_attributes.PRIORITY if system.HasField("priority") else topic_attributes.NORMAL
    if system.trace_context and not validation.has_control_character(system.trace_context):
        # Kept only without control characters, as the born host: its \x01 or \x02 would rewrite the
        # stored properties text (a DELAY or TRAN_MSG smuggled past the topic's message type check).
        properties[PROPERTY_TRACE_CONTEXT] = system.trace_context
    born_host = system.born_host.strip() or peer_host
    if born_host and not validation.has_control_character(born_host):
        properties[PROPERTY_BORN_HOST] = born_host
    born_ms = millis(system.born_timestamp) if system.HasField("born_timestamp") else now_ms
    properties[PROPERTY_BORN_TIMESTAMP] = str(born_ms)
    text = properties_text(properties.items())
    if len(text.encode()) > fmt.PROPERTIES_LENGTH_MAX - 256:
        # The store's limit, less the room a half message's PGROUP (its topic) takes.
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, "the message's properties do not fit a record")
    lite = ""
    if system.HasField("lite_topic") or system.message_type == pb.LITE:
        if kind != topic_attributes.NORMAL:
            # The 5.x clients refuse it: a lite topic with a message group, a delivery time, a priority
            # or a transaction. Never stored as one of them.
            raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                             f"a Lite message cannot also be {kind} (lite_topic with a message group, delivery "
                             f"time, priority or transaction)")
        lite = validation.lite_topic(system.lite_topic, settings.max_lite_topic_size)
        properties[PROPERTY_INNER_MULTI_DISPATCH] = lmq_name(message.topic.name, lite)
        kind = topic_attributes.LITE
    return Outgoing(message_id, bytes(body), properties, sys_flag, born_ms, max(0, system.delivery_attempt),
                    kind, group, lite, None if lite else text)   # a Lite message's properties grew since


def has_bad_id_characters(text: str) -> bool:
    return validation.has_control_character(text) or " " in text


# ---------------------------------------------------------------- store -> gRPC

def records(raw: bytes) -> list[fmt.Record]:
    """The records of a pull or pop answer's body (ValueError when it holds something else)."""
    return list(fmt.iter_records(raw))


def inflated_body(record: fmt.Record) -> bytes:
    """The body as the producer gave it: a remoting producer's compressed body (zlib, LZ4 or ZSTD)
    inflated, so every gRPC reader gets IDENTITY bytes (the flag is only a hint: bytes that do not
    inflate stay)."""
    try:
        return inflate(record.body, record.sys_flag)
    except ValueError:
        return record.body


@functools.lru_cache(maxsize=1024)   # a few hosts (the brokers, the producers) over every record
def _host(raw: bytes) -> str:
    try:
        ip, port = unpack_host(raw)
    except (OSError, ValueError):
        return ""
    return f"{ip}:{port}"


def incoming(record: fmt.Record, *, receipt_handle: str | None = None, delivery_attempt: int | None = None,
             topic: str | None = None) -> pb.Message:
    """A stored message as a gRPC Message. ``topic`` overrides the record's (a pop retry record
    is presented with its original topic)."""
    props = record.properties
    # Filled in place (a SystemProperties built apart and given to Message() is copied; a Timestamp
    # made and CopyFrom'd likewise): ~20% of the proxy's receive path was this function.
    message = pb.Message()
    system = message.system_properties
    if PROPERTY_TAGS in props:
        system.tag = props[PROPERTY_TAGS]
    if props.get(PROPERTY_KEYS):
        system.keys.extend(props[PROPERTY_KEYS].split(" "))
    system.message_id = props.get(PROPERTY_UNIQ_KEY) or record.offset_msg_id
    body = inflated_body(record)
    system.body_digest.type = pb.MD5
    system.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    system.body_encoding = pb.IDENTITY
    system.message_type = _GRPC_TYPES[topic_attributes.message_type_of(props)]
    born_ms = record.born_timestamp_ms
    try:
        born_ms = int(props.get(PROPERTY_BORN_TIMESTAMP, born_ms))
    except ValueError:
        pass
    _set_millis(system.born_timestamp, born_ms)
    system.born_host = props.get(PROPERTY_BORN_HOST) or _host(record.born_host)
    _set_millis(system.store_timestamp, record.store_timestamp_ms)
    system.store_host = _host(record.store_host)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS)
    delay_s = props.get(PROPERTY_TIMER_DELAY_SEC)
    if delay_s and delay_s.isdigit():
        # As RocketMQ's GrpcConverter reads a delay in seconds: from the moment the message is handed out.
        system.delivery_timestamp.CopyFrom(timestamp(int(time.time() * 1000) + int(delay_s) * 1000))
    elif deliver and deliver.lstrip("-").isdigit():
        system.delivery_timestamp.CopyFrom(timestamp(int(deliver)))
    if props.get(PROPERTY_SHARDING_KEY):
        system.message_group = props[PROPERTY_SHARDING_KEY]
    lite = lite_topic_of(props)
    if lite is not None:
        system.lite_topic = lite
    priority = props.get(PROPERTY_PRIORITY)
    if priority is not None and priority.isdigit() and int(priority) <= INT32_MAX:
        system.priority = int(priority)
    if receipt_handle:
        system.receipt_handle = receipt_handle
    system.queue_id = record.queue_id
    system.queue_offset = record.queue_offset
    # int32 in the protocol: a record stored with RECONSUMETIMES 2**31 - 1 would overflow it.
    system.delivery_attempt = delivery_attempt if delivery_attempt else min(record.reconsume_times + 1, INT32_MAX)
    if props.get(PROPERTY_TRACE_CONTEXT):
        system.trace_context = props[PROPERTY_TRACE_CONTEXT]
    if props.get(PROPERTY_DLQ_ORIGIN_TOPIC) and props.get(PROPERTY_DLQ_ORIGIN_MESSAGE_ID):
        system.dead_letter_queue.topic = props[PROPERTY_DLQ_ORIGIN_TOPIC]
        system.dead_letter_queue.message_id = props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID]
    message.topic.name = topic or record.topic
    # Item by item, and only when there is one: the map's update() is MutableMapping's, in Python, with
    # ABC isinstance checks (~1 us a message even for none).
    user = [(k, v) for k, v in props.items() if k not in SYSTEM_PROPERTIES]
    if user:
        user_properties = message.user_properties
        for k, v in user:
            user_properties[k] = v
    message.body = body
    return message


def _set_millis(field: Timestamp, ms: int) -> None:
    field.seconds, field.nanos = ms // 1000, (ms % 1000) * 1_000_000
