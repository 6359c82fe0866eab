"""The checks RocketMQ 5's proxy makes on what a client sends (GrpcValidator, SendMessageActivity):
each refusal is a ``ProxyError`` with the code Apache's proxy gives for it."""

from __future__ import annotations

import re

from rocketbox.cluster.config import name_problem
from rocketbox.cluster.message.properties import SYSTEM_PROPERTIES
from rocketbox.cluster.message.system_topics import is_system_topic
from rocketbox.cluster.protocol import SYSTEM_GROUP_PREFIX
from rocketbox.cluster.proxy.protos import Code
from rocketbox.cluster.proxy.status import ProxyError


# Java's CharMatcher.javaIsoControl: U+0000..U+001F and U+007F..U+009F. Searched by the regex engine:
# a generator over the characters cost ten times as much, on every message id of every send.
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")


def has_control_character(text: str) -> bool:
    """Java's CharMatcher.javaIsoControl (they also separate the stored properties text, so one
    would corrupt the record's properties)."""
    return _CONTROL_CHARACTER.search(text) is not None


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


def lite_topic(text: str, max_bytes: int) -> str:
    """Apache 5.5's GrpcValidator.validateLiteTopic: not blank, at most ``max_bytes`` UTF-8 bytes,
    only ASCII letters, digits, '-' and '_' (so '$', the lite queue name's separator, never occurs)."""
    if not text.strip():
        raise ProxyError(Code.ILLEGAL_LITE_TOPIC, "lite topic cannot be the char sequence of whitespace")
    if len(text.encode()) > max_bytes:
        raise ProxyError(Code.ILLEGAL_LITE_TOPIC, f"lite topic exceed the max size {max_bytes}")
    if not all(c.isascii() and (c.isalnum() or c in "-_") for c in text):
        raise ProxyError(Code.ILLEGAL_LITE_TOPIC,
                         "lite topic can only contain alphanumeric characters, hyphens(-), and underscores(_)")
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
