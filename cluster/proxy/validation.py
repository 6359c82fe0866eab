"""The checks RocketMQ 5's proxy makes on what a client sends (GrpcValidator, SendMessageActivity):
each refusal is a ``ProxyError`` with the code Apache's proxy gives for it."""

from __future__ import annotations

from rocketbox.cluster.config import name_problem
from rocketbox.cluster.protocol import SYSTEM_GROUP_PREFIX
from rocketbox.cluster.proxy.protos import Code
from rocketbox.cluster.proxy.status import ProxyError

# RocketMQ's system topics (TopicValidator.SYSTEM_TOPIC_SET) and prefix: no client reads or writes them.
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

# Property names the broker and clients give meaning to (RocketMQ's MessageConst.STRING_HASH_SET):
# a user property may not take one, or it could turn a message into a delayed or transactional one.
SYSTEM_PROPERTIES = frozenset({
    "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET",
    "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG",
    "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "EXTEND_UNIQ_INFO", "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME", "INNER_NUM", "INNER_BASE", "CHECK_IMMUNITY_TIME_IN_SECONDS", "TRAN_PREPARED_QUEUE_OFFSET",
    "__transactionId__", "TRANSACTION_CHECK_TIMES", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL",
    "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
    "__SHARDINGKEY", "PROPERTY_FORWARD_QUEUE_ID", "REDIRECT", "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET",
    "TRACE_CONTEXT", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "__BORNHOST", "BORN_TIMESTAMP", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL",
    "TIMER_DELAY_MS", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
    # The store's whole-record CRC (shm/commitlog_format.py): never a gRPC consumer's user property,
    # as RocketMQ's proxy leaves it out of user_properties (GrpcConverter.buildUserAttributes).
    "__CRC32#"})


def has_control_character(text: str) -> bool:
    """Java's CharMatcher.javaIsoControl: U+0000..U+001F and U+007F..U+009F (they also separate
    the stored properties text, so one would corrupt the record's properties)."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX) or topic.startswith("RMQ_SYS_")


def topic(name: str) -> str:
    problem = name_problem("topic", name)
    if problem:
        raise ProxyError(Code.ILLEGAL_TOPIC, problem)
    if is_system_topic(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, f"cannot access system topic {name}")
    return name


def consumer_group(name: str) -> str:
    problem = name_problem("consumer group", name)
    if problem:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, problem)
    if name.startswith(SYSTEM_GROUP_PREFIX):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group {name}")
    return name


def tag(text: str) -> str:
    if text:
        if not text.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in text:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if has_control_character(text):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")
    return text


def message_key(text: str) -> str:
    if text:
        if not text.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if has_control_character(text):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
    return text


def message_group(text: str, max_bytes: int) -> str:
    if text:
        if not text.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if len(text.encode()) >= max_bytes:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_bytes}")
        if has_control_character(text):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
    return text


def user_properties(properties, max_count: int) -> int:
    """Checks each user property; the bytes they take (counted against the properties limit)."""
    if len(properties) > max_count:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {max_count}")
    size = 0
    for key, value in properties.items():
        if key in SYSTEM_PROPERTIES:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if not key or has_control_character(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot be empty or contain "
                                                                "control character")
        if has_control_character(value):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control "
                                                                "character")
        size += len(key.encode()) + len(value.encode())
    return size


def invisible_ms(value_ms: int, min_ms: int, max_ms: int) -> int:
    if value_ms < min_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms} ms")
    if value_ms > max_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {max_ms} ms")
    return value_ms
