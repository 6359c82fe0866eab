"""A message's properties: RocketMQ's names (MessageConst) and the text that carries them.

Pure: no I/O. The properties of a message travel and are stored as one UTF-8 text of
``name \\x01 value \\x02`` pairs (MessageDecoder.messageProperties2String); a reader splits on
\\x02, then on the first \\x01.
"""

from __future__ import annotations

from typing import Iterable

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_WAIT = "WAIT"
PROPERTY_DELAY = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
PROPERTY_TRAN_MSG = "TRAN_MSG"
PROPERTY_PGROUP = "PGROUP"
PROPERTY_CRC32 = "__CRC32#"
PROPERTY_CLUSTER = "CLUSTER"
# A priority message's priority (RocketMQ 5.4, RIP-80), a decimal >= 0: its queue, and its place in a pop.
PROPERTY_PRIORITY = "_SYS_MSG_PRIORITY_"
# The exact delivery time of a delayed message (RocketMQ 5's timer property), in ms since the epoch.
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
# A delay from the send, in seconds or ms (RocketMQ 5's Message.setDelayTimeSec / setDelayTimeMs).
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
# What RocketMQ 5's timer adds to a timed message: when it is due (the delivery time floored to the
# timer's precision), when the timer took it in, when it let it out.
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names the broker and clients give meaning to (MessageConst.STRING_HASH_SET): a user
# property may not take one, or it could turn a message into a delayed or transactional one.
# With the store's whole-record CRC (``__CRC32#``), which RocketMQ's proxy never hands a gRPC
# consumer as a user property (GrpcConverter.buildUserAttributes).
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
    "TIMER_DELAY_MS", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", PROPERTY_PRIORITY, PROPERTY_CRC32})


def properties_text(pairs: Iterable[tuple[str, str]]) -> str:
    """`name \\x01 value \\x02` pairs (RocketMQ MessageDecoder's properties string)."""
    return "".join(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}" for name, value in pairs)


def property_mark(name: str, value: str | None = None) -> str:
    """What a properties string contains when it has ``name`` (with ``value``, if given): a
    substring test on the stored text, without decoding it."""
    return f"{name}{NAME_VALUE_SEPARATOR}" if value is None else f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}"


def encode_properties(properties: dict[str, str]) -> bytes:
    """The properties string, UTF-8."""
    if not properties:
        return b""
    return properties_text(properties.items()).encode()


def decode_properties(raw: bytes | memoryview) -> dict[str, str]:
    if not raw:
        return {}
    text = bytes(raw).decode("utf-8", "replace")
    out = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        if pair:
            name, _, value = pair.partition(NAME_VALUE_SEPARATOR)
            out[name] = value
    return out


def split_property(text: str, name: str) -> tuple[str | None, str] | None:
    """``(value, the rest)`` of a plain properties text, as RocketMQ's clients write one (every pair
    ``name \x01 value``, no pair empty, no name twice; the last \x02 optional): ``name``'s value
    (None without it) and the text without its pair, \x02-closed, both exactly what
    ``decode_properties`` reads and ``encode_properties`` writes back once ``name`` is dropped. None
    when the text is not plain (decoding and encoding would change more than that pair). A send's
    WAIT leaves so in one pass over the pairs, without a dict written back (half the time)."""
    pairs = text.split(PROPERTY_SEPARATOR)
    if not pairs[-1]:
        pairs.pop()
    names, value, kept = set(), None, []
    for pair in pairs:
        pair_name, separator, pair_value = pair.partition(NAME_VALUE_SEPARATOR)
        if not separator or pair_name in names:
            return None
        names.add(pair_name)
        if pair_name == name:
            value = pair_value
        else:
            kept.append(pair)
    kept.append("")
    return value, PROPERTY_SEPARATOR.join(kept) if len(kept) > 1 else ""
