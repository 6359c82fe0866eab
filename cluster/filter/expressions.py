"""Subscription expressions, as client and broker both read them.

Tags ("*" or "TagA || TagB"): the broker matches the tag hash stored in the ConsumeQueue
(no CommitLog read); the client re-checks the tag string because two tags can share a
hash (SPEC §2). SQL92 expressions (``expressionType`` "SQL92") compile in ``sql92.py``.
"""

from __future__ import annotations

from functools import lru_cache

from rocketbox.cluster.message.tags import tag_hash_code

SUBSCRIBE_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


def parse_tags(expression: str | None) -> frozenset[str] | None:
    """The tag set of an expression, or None for every tag."""
    if expression is None:
        return None
    expression = expression.strip()
    if expression in ("", SUBSCRIBE_ALL):
        return None
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return tags or None


@lru_cache(maxsize=4096)
def tag_hashes_of(expression: str | None) -> frozenset[int] | None:
    tags = parse_tags(expression)
    if tags is None:
        return None
    return frozenset(tag_hash_code(tag) for tag in tags)


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ's ExpressionType.isTagType: absent, empty or "TAG"."""
    return not expression_type or expression_type == EXPRESSION_TAG
