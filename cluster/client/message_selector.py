"""MessageSelector: what a consumer subscribes to, by tag expression or by SQL92 (RocketMQ's MessageSelector).

``MessageSelector.by_tag("TagA || TagB")`` is the same as subscribing with the string
``"TagA || TagB"``; ``MessageSelector.by_sql("a > 5 AND TAGS IN ('A', 'B')")`` has the
broker evaluate the expression over each message's properties (the broker needs
``enable_property_filter``; an invalid expression is refused when the consumer starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rocketbox.cluster.filter.expressions import EXPRESSION_SQL92, EXPRESSION_TAG, SUBSCRIBE_ALL, parse_tags


@dataclass(frozen=True)
class MessageSelector:
    expression_type: str  # "TAG" or "SQL92"
    expression: str

    @classmethod
    def by_tag(cls, expression: str | None = SUBSCRIBE_ALL) -> "MessageSelector":
        return cls(EXPRESSION_TAG, expression or SUBSCRIBE_ALL)

    @classmethod
    def by_sql(cls, expression: str) -> "MessageSelector":
        if not isinstance(expression, str) or not expression.strip():
            raise ValueError("an SQL92 selector needs an expression")
        return cls(EXPRESSION_SQL92, expression)

    @classmethod
    def of(cls, selector: "MessageSelector | str | None") -> "MessageSelector":
        """A selector from what a subscribe or pull call was given: a plain string is a tag expression."""
        if isinstance(selector, MessageSelector):
            return selector
        if selector is None or isinstance(selector, str):
            return cls.by_tag(selector)
        raise TypeError(f"subscribe with a tag expression or a MessageSelector, not {type(selector).__name__}")

    def tags_to_recheck(self) -> frozenset[str] | None:
        """The tag strings the client re-checks (the broker matched hashes only); None: keep all."""
        return _tags_of(self.expression) if self.expression_type == EXPRESSION_TAG else None


_tags_of = lru_cache(maxsize=1024)(parse_tags)  # asked once per pull
