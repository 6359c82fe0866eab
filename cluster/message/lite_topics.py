"""Lite topics' names (RocketMQ 5.5, RIP-83; Apache's LiteUtil): a lite topic lives under a parent
topic of ``message.type=LITE`` and is named in a message by ``INNER_MULTI_DISPATCH`` =
``%LMQ%$<parent>$<lite topic>``, the light message queue Apache dispatches it to. ``$`` cannot occur
in a topic or lite topic name, so the name splits back unambiguously. Pure: no I/O."""

from __future__ import annotations

PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
LMQ_PREFIX = "%LMQ%"
SEPARATOR = "$"
LITE_TOPIC_PREFIX = LMQ_PREFIX + SEPARATOR


def lmq_name(parent_topic: str, lite_topic: str) -> str:
    return f"{LITE_TOPIC_PREFIX}{parent_topic}{SEPARATOR}{lite_topic}"


def split_lmq_name(name: str | None) -> tuple[str, str] | None:
    """(parent topic, lite topic) of a lite topic's queue name, or None when it is not one."""
    if not name or not name.startswith(LITE_TOPIC_PREFIX):
        return None
    parent, sep, lite = name[len(LITE_TOPIC_PREFIX):].partition(SEPARATOR)
    if not sep or not parent or not lite or SEPARATOR in lite:
        return None
    return parent, lite


def lite_topic_of(properties: dict[str, str]) -> str | None:
    """The lite topic a stored message was sent to, or None."""
    split = split_lmq_name(properties.get(PROPERTY_INNER_MULTI_DISPATCH))
    return split[1] if split else None
