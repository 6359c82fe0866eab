"""SQL92 subscriptions: RocketMQ's message selector language over message properties (pure, no I/O).

``compile_sql("a > 5 AND b = 'x'")`` parses once (memoized, failures too) and returns a
``SqlSelector`` whose ``matches(properties)`` says whether a message with those
properties (``dict[str, str]``, as stored; ``TAGS`` and ``KEYS`` among them) is
delivered. The language is the one RocketMQ's filter module parses (its JavaCC
``SelectorParser.jj``, from ActiveMQ's JMS selectors):

- literals: integers (Java long range, optional ``L`` suffix), decimals (``1.5``, ``.5``,
  ``5e3``), strings in single quotes (``''`` is a quote), ``TRUE``, ``FALSE``, ``NULL``;
- property names ``[A-Za-z_$][A-Za-z0-9_$]*``; keywords are case-insensitive;
- ``=  <>  >  >=  <  <=``, ``[NOT] BETWEEN a AND b``, ``[NOT] IN ('a', 'b')``,
  ``IS [NOT] NULL``, ``[NOT] CONTAINS / STARTSWITH / ENDSWITH 'text'``, unary ``+ -``,
  ``AND OR NOT`` and parentheses; ``--`` and ``/* */`` comments.

Precedence, loosest first: OR, AND, NOT, equality (``= <> IS``), comparison
(``< > BETWEEN IN CONTAINS ...``), unary ``+ - NOT``. RocketMQ gives NOT only the
unary level, so it refuses ``NOT a > 5`` ("will not result in a boolean value")
where this reads SQL's ``NOT (a > 5)``; every expression both accept means the same.

Parse-time refusals follow RocketMQ: ordering operands must be numbers or properties
(``a > 'x'`` is refused), ``= NULL`` must be written ``IS NULL``, IN needs a property on
its left, BETWEEN bounds must not be NULL nor reversed, and the whole expression (and
each AND/OR/NOT operand) must be a condition (a bare property counts, as a boolean).

Evaluation is three-valued (TRUE, FALSE, unknown); only TRUE delivers. Property values
are strings: against a number, or in an ordering comparison, a value is read as a
number (``"10" > 9``), and a value that is not one makes that comparison unknown (RocketMQ
raises there, which drops the message whatever the rest says). A missing property makes
every comparison on it unknown, so ``NOT (a = 1)`` does not match a message without
``a``; only ``IS NULL`` sees it. Strings equal strings exactly (``'5' = '5.0'`` is
false). A property compared with TRUE/FALSE, or used as a condition, is true when its
value is ``true`` in any case.
"""

from __future__ import annotations

import operator
import re
from functools import lru_cache
from typing import Callable, Mapping

from rocketbox.cluster.filter.sql92_parser import (Between, Compare, In, IsNull, Literal, Logic, Node, Property, SqlParseError,
                                         StringTest, Unary, parse)

__all__ = ["SqlParseError", "SqlSelector", "compile_sql", "parse", "evaluate"]

# ---------------------------------------------------------------- evaluation

_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?\Z")


def _number(text: str):
    """A property value as a number (Java's Long.valueOf, else Double.valueOf), or None."""
    if _INT_TEXT.match(text):
        return int(text)
    if _FLOAT_TEXT.match(text):
        return float(text.rstrip("fFdD"))
    return None


def _truth(text: str):
    lowered = text.lower()
    return True if lowered == "true" else False if lowered == "false" else None


def _equal(lv, rv):
    """``lv = rv`` for two non-NULL values: True, False or None (unknown)."""
    lc, rc = lv.__class__, rv.__class__
    if lc is rc:
        return lv == rv
    if lc is str or rc is str:
        text, other = (lv, rv) if lc is str else (rv, lv)
        if other.__class__ is bool:
            truth = _truth(text)
            return None if truth is None else truth == other
        number = _number(text)
        return None if number is None else number == other
    if lc is bool or rc is bool:
        return False
    return lv == rv  # int and float


_ORDER = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}

Evaluator = Callable[[Mapping[str, str]], object]


def _compile(node: Node) -> Evaluator:
    """A closure computing ``node`` over a message's properties (conditions give True/False/None)."""
    if isinstance(node, Literal):
        value = node.value
        return lambda props: value
    if isinstance(node, Property):
        name = node.name
        return lambda props: props.get(name)
    if isinstance(node, Unary):
        return _compile_unary(node)
    if isinstance(node, Logic):
        return _compile_logic(node)
    if isinstance(node, Compare):
        return _compile_compare(node)
    if isinstance(node, IsNull):
        if isinstance(node.operand, Property):
            name = node.operand.name
            return (lambda props: name in props) if node.negated else (lambda props: name not in props)
        operand = _compile(node.operand)
        return (lambda props: operand(props) is not None) if node.negated else (lambda props: operand(props) is None)
    if isinstance(node, Between):
        # RocketMQ: x >= low AND x <= high; NOT BETWEEN is x < low OR x > high.
        if node.negated:
            parts = (Compare("<", node.operand, node.low), Compare(">", node.operand, node.high))
            return _compile_logic(Logic("OR", parts))
        parts = (Compare(">=", node.operand, node.low), Compare("<=", node.operand, node.high))
        return _compile_logic(Logic("AND", parts))
    if isinstance(node, In):
        name, values, negated = node.operand.name, node.values, node.negated

        def in_list(props):
            v = props.get(name)
            return None if v is None else (v in values) != negated
        return in_list
    if isinstance(node, StringTest):
        operand = _compile(node.operand)
        text, negated = node.text, node.negated
        test = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}[node.op]

        def string_test(props):
            # RocketMQ: FALSE (not unknown) for a missing or non-string value and for an empty text.
            v = operand(props)
            if v.__class__ is not str or not text:
                return False
            return test(v, text) != negated
        return string_test
    raise TypeError(f"not an SQL92 node: {node!r}")


def _compile_unary(node: Unary) -> Evaluator:
    operand = _compile(node.operand)
    if node.op == "-":
        def negate(props):
            v = operand(props)
            if v.__class__ is str:
                v = _number(v)
            return None if v is None or v.__class__ is bool else -v
        return negate
    if node.op == "CONDITION":
        def as_condition(props):
            v = operand(props)
            return None if v is None else _truth(v) is True
        return as_condition

    def negation(props):
        v = operand(props)
        return None if v is None else not v
    return negation


def _compile_logic(node: Logic) -> Evaluator:
    """Kleene logic: one FALSE decides an AND (one TRUE an OR); else any unknown makes it unknown."""
    operands = tuple(_compile(o) for o in node.operands)
    decisive = node.op == "OR"

    def logic(props):
        unknown = False
        for operand in operands:
            v = operand(props)
            if v is decisive:
                return decisive
            if v is None:
                unknown = True
        return None if unknown else not decisive
    return logic


def _compile_compare(node: Compare) -> Evaluator:
    order = _ORDER.get(node.op)
    if order is not None and isinstance(node.left, Property) and isinstance(node.right, Literal):
        # The common shape, a property against a number literal, without the generic steps.
        name, bound = node.left.name, node.right.value

        def property_vs_number(props):
            v = props.get(name)
            if v is None:
                return None
            v = _number(v)
            return None if v is None else order(v, bound)
        return property_vs_number
    if order is None:
        negated = node.op == "<>"

        def decide(lv, rv):
            v = _equal(lv, rv)
            return None if v is None else v != negated
    else:
        def decide(lv, rv):
            # Ordering compares numbers only: a string operand (a property value) is read as one.
            if lv.__class__ is str:
                lv = _number(lv)
            if rv.__class__ is str:
                rv = _number(rv)
            return None if lv is None or rv is None else order(lv, rv)
    left, right = _compile(node.left), _compile(node.right)

    def compare(props):
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        return None if rv is None else decide(lv, rv)
    return compare


def evaluate(node: Node, properties: Mapping[str, str]):
    """``node`` over ``properties``: True, False, None (unknown) or, for a value, the value."""
    return _compile(node)(properties)


class SqlSelector:
    """A compiled SQL92 subscription."""

    __slots__ = ("expression", "ast", "_evaluate")

    def __init__(self, expression: str, ast: Node):
        self.expression = expression
        self.ast = ast
        self._evaluate = _compile(ast)

    def matches(self, properties: Mapping[str, str]) -> bool:
        return self._evaluate(properties) is True

    def __repr__(self) -> str:
        return f"SqlSelector({self.expression!r})"


@lru_cache(maxsize=1024)
def _compiled(expression: str) -> SqlSelector | SqlParseError:
    try:
        return SqlSelector(expression, parse(expression))
    except SqlParseError as error:
        return error  # remembered too: a bad subscription is refused on every pull


def compile_sql(expression: str) -> SqlSelector:
    """The selector of ``expression`` (memoized); raises SqlParseError with the reason and position."""
    result = _compiled(expression)
    if isinstance(result, SqlParseError):
        raise result
    return result
