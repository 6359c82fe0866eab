"""Topic attributes (RocketMQ 5's TopicAttributes): the message types a topic takes.

A topic's attributes are a ``dict[str, str]`` kept with its config (``broker/topics.py``). Only
``message.type`` is known here; RocketMQ 5 also knows ``queue.type``, ``cleanup.policy`` and
``reserve.time``, which would promise what RocketBox does not do (batch ConsumeQueues,
compaction, tiered storage), so they are refused like any unknown key.

Changes travel as RocketMQ's modification string (``AttributeParser``, the ``attributes`` header
of UPDATE_AND_CREATE_TOPIC, mqadmin updateTopic's ``-a``): comma-joined ``+key=value`` (add or
change) and ``-key`` (delete). ``apply_modification`` follows ``AttributeUtil.alterCurrentAttributes``:
a topic being created takes only additions; an existing one keeps the attributes a request does not
mention, may not delete what it lacks; each key at most once; values checked against the key's set.

A topic without ``message.type`` takes every type. RocketMQ 5 reads a missing value as NORMAL
(``TopicConfig.getTopicMessageType``) and its proxy then refuses FIFO, DELAY and TRANSACTION
sends to such a topic (``DefaultTopicMessageTypeValidator``; its broker checks nothing on
remoting sends). RocketBox's topics were all created without attributes and take every type
today, so refusing would break every existing user: undeclared means every type here.

PRIORITY (RocketMQ 5.4, RIP-80) is a type a topic must declare: an undeclared or MIXED topic does
not take it (Apache's routes list only the four classic types for MIXED), since only a PRIORITY
topic's pops serve the higher priorities first (``broker/pop.py``). LITE (RocketMQ 5.5, RIP-83) is
declared the same way: a LITE topic takes only Lite messages (a ``lite_topic`` named by
INNER_MULTI_DISPATCH, ``message/lite_topics.py``) and a Lite message goes only to a LITE topic.
``lite.topic.expiration`` (Apache's LITE_EXPIRATION_ATTRIBUTE) is a LITE topic's idle time in
minutes after which a lite topic is forgotten: -1 (the default) never, at most 43,200 (30 days).
"""

from __future__ import annotations

from rocketbox.cluster.message.lite_topics import lite_topic_of

MESSAGE_TYPE_KEY = "message.type"

NORMAL = "NORMAL"
FIFO = "FIFO"
DELAY = "DELAY"
TRANSACTION = "TRANSACTION"
MIXED = "MIXED"
PRIORITY = "PRIORITY"
LITE = "LITE"
# RocketMQ's value set also has UNSPECIFIED; it is taken (mqadmin may send it) and read as undeclared.
UNSPECIFIED = "UNSPECIFIED"
# What an undeclared or MIXED topic takes, and what a topic may declare.
CLASSIC_TYPES = (NORMAL, FIFO, DELAY, TRANSACTION)
MESSAGE_TYPES = (*CLASSIC_TYPES, MIXED, PRIORITY, LITE)

KNOWN_VALUES: dict[str, frozenset[str]] = {MESSAGE_TYPE_KEY: frozenset((*MESSAGE_TYPES, UNSPECIFIED))}
LITE_EXPIRATION_KEY = "lite.topic.expiration"
LITE_EXPIRATION_MAX_MINUTES = 30 * 24 * 60

# Message properties that make a message's type (RocketMQ's MessageConst names).
_PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
DELAY_PROPERTIES = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
_PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
_PROPERTY_PRIORITY = "_SYS_MSG_PRIORITY_"   # RocketMQ 5.4's MessageConst.PROPERTY_PRIORITY


class AttributeProblem(ValueError):
    """A modification string or change that RocketMQ would refuse; the message says why."""


def parse_modification(text: str | None) -> dict[str, str]:
    """``"+message.type=FIFO,-other"`` -> ``{"+message.type": "FIFO", "-other": ""}`` (empty: none)."""
    changes: dict[str, str] = {}
    if not text or not text.strip():
        return changes
    entries = text.split(",")
    while entries and not entries[-1].strip():
        entries.pop()   # Java's split drops trailing empty strings: "+a=b," is "+a=b", "," is nothing
    for entry in entries:
        entry = entry.strip()
        if "=" in entry:
            key, _, value = entry.partition("=")
            if not key.startswith("+"):
                raise AttributeProblem(f"add/alter attribute format is wrong: {entry!r} (want +key=value)")
            if not value:
                raise AttributeProblem(f"attribute {key[1:]!r} has no value: {entry!r}")
        else:
            key, value = entry, ""
            if not key.startswith("-"):
                raise AttributeProblem(f"delete attribute format is wrong: {entry!r} (want -key)")
        if key in changes:
            raise AttributeProblem(f"key duplication: {key}")
        changes[key] = value
    return changes


def format_modification(changes: dict[str, str]) -> str:
    """The inverse of ``parse_modification`` (RocketMQ's ``AttributeParser.parseToString``)."""
    return ",".join(f"{key}={value}" if value else key for key, value in changes.items())


def apply_modification(current: dict[str, str], changes: dict[str, str], *, creating: bool) -> dict[str, str]:
    """The attributes after ``changes`` (from ``parse_modification``); AttributeProblem when refused."""
    result = dict(current)
    seen: set[str] = set()
    for signed_key, value in changes.items():
        sign, key = signed_key[:1], signed_key[1:]
        if not key or "+" in key or "-" in key:
            raise AttributeProblem(f"attribute key format is wrong: {signed_key!r}")
        if key in seen:
            raise AttributeProblem(f"alter duplication key. key: {key}")
        seen.add(key)
        allowed = KNOWN_VALUES.get(key)
        if allowed is None and key != LITE_EXPIRATION_KEY:
            raise AttributeProblem(f"unsupported key: {key} (RocketBox's topics know only {MESSAGE_TYPE_KEY} "
                                   f"and {LITE_EXPIRATION_KEY})")
        if sign == "+":
            if key == LITE_EXPIRATION_KEY:
                _check_lite_expiration(value)
            elif value not in allowed:
                raise AttributeProblem(f"{key}={value} is not one of {', '.join(sorted(allowed))}")
            result[key] = value
        elif creating:
            raise AttributeProblem(f"only add attribute is supported while creating topic. key: {key}")
        elif key not in current:
            raise AttributeProblem(f"attempt to delete a nonexistent key: {key}")
        else:
            del result[key]
    return result


def _check_lite_expiration(value: str) -> None:
    """RocketMQ's LongRangeAttribute(-1, 30 days in minutes)."""
    try:
        minutes = int(value)
    except ValueError:
        raise AttributeProblem(f"{LITE_EXPIRATION_KEY}={value} is not a number") from None
    if not -1 <= minutes <= LITE_EXPIRATION_MAX_MINUTES:
        raise AttributeProblem(f"{LITE_EXPIRATION_KEY}={value} is out of range [-1, {LITE_EXPIRATION_MAX_MINUTES}]")


def lite_expiration_ms(attributes: dict[str, str]) -> int | None:
    """A LITE topic's idle time before a lite topic of it is forgotten, or None (never)."""
    try:
        minutes = int(attributes.get(LITE_EXPIRATION_KEY, "-1"))
    except ValueError:
        return None
    return minutes * 60_000 if minutes > 0 else None


def declared_message_type(attributes: dict[str, str]) -> str | None:
    """The topic's ``message.type``, or None when it declares none (UNSPECIFIED counts as none)."""
    value = attributes.get(MESSAGE_TYPE_KEY)
    return None if value in (None, UNSPECIFIED) else value


def accepted_types(message_type: str | None) -> tuple[str, ...]:
    """The message types a topic of ``message_type`` takes (a gRPC route's accept_message_types)."""
    if message_type is None or message_type == MIXED:
        return CLASSIC_TYPES
    return (message_type,) if message_type in MESSAGE_TYPES else ()


def message_type_of(properties: dict[str, str]) -> str:
    """What a message is, from its properties (RocketMQ's ``TopicMessageType.parseFromMessageProperty``)."""
    if properties.get(_PROPERTY_TRANSACTION_PREPARED) == "true":
        return TRANSACTION
    if lite_topic_of(properties) is not None:
        return LITE
    if any(properties.get(name) is not None for name in DELAY_PROPERTIES):
        return DELAY
    if properties.get(_PROPERTY_SHARDING_KEY) is not None:
        return FIFO
    if properties.get(_PROPERTY_PRIORITY) is not None:
        return PRIORITY
    return NORMAL
