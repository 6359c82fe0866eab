"""Tag subscriptions: "*" or "TagA || TagB", matched by the tag hash stored in the ConsumeQueue.

The broker filters on hash codes only (no CommitLog read); the client re-checks the
tag string because two tags can share a hash (SPEC §2).
"""

from __future__ import annotations

from functools import lru_cache

from cluster.shm.consumequeue_format import tag_hash_code

SUBSCRIBE_ALL = "*"


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

