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
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Callable, Mapping

__all__ = ["SqlParseError", "SqlSelector", "compile_sql", "parse", "evaluate"]

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
# Parentheses, unary operators and equality chains nest at most this deep: the parser and
# the evaluator recurse per level, and an expression comes from the network.
DEPTH_MAX = 64


class SqlParseError(ValueError):
    """An expression the broker refuses; ``position`` is a 0-based index into it."""

    def __init__(self, reason: str, position: int, expression: str):
        near = expression[position:position + 20]
        where = f"at position {position}" + (f" (near {near!r})" if near else " (end of expression)")
        shown = expression if len(expression) <= 200 else expression[:200] + "..."
        super().__init__(f"invalid SQL92 expression {shown!r}: {reason} {where}")
        self.reason = reason
        self.position = position
        self.expression = expression


# ---------------------------------------------------------------- tokens

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                      "CONTAINS", "STARTSWITH", "ENDSWITH"})
STRING_TESTS = ("CONTAINS", "STARTSWITH", "ENDSWITH")

_TOKEN = re.compile(r"""
    (?P<skip> [ \t\n\r\f]+ | --[^\n\r]* | /\*.*?\*/ )
  | (?P<float> [0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)? | \.[0-9]+(?:[eE][+-]?[0-9]+)? | [0-9]+[eE][+-]?[0-9]+ )
  | (?P<int> [0-9]+[lL]? )
  | (?P<str> '(?:[^']|'')*' )
  | (?P<id> [A-Za-z_$][A-Za-z0-9_$]* )
  | (?P<op> <> | <= | >= | [=<>(),+-] )
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str    # "number", "string", "id", a keyword ("AND"), an operator ("<="), or "end"
    value: object
    pos: int


def tokenize(expression: str) -> list[Token]:
    tokens = []
    pos, end = 0, len(expression)
    match = _TOKEN.match
    while pos < end:
        m = match(expression, pos)
        if m is None:
            char = expression[pos]
            if char == "'":
                raise SqlParseError("unterminated string literal", pos, expression)
            if expression.startswith("/*", pos):
                raise SqlParseError("unterminated comment", pos, expression)
            if char == "!" and expression.startswith("!=", pos):
                raise SqlParseError("unexpected '!=' (write <>)", pos, expression)
            raise SqlParseError(f"unexpected character {char!r}", pos, expression)
        kind = m.lastgroup
        text = m.group()
        if kind == "float":
            value = float(text)
            if value == float("inf"):
                raise SqlParseError(f"number {text} is out of the double range", pos, expression)
            tokens.append(Token("number", value, pos))
        elif kind == "int":
            value = int(text.rstrip("lL"))
            if value > LONG_MAX + 1:  # LONG_MAX + 1 only as the operand of a unary minus (checked there)
                raise SqlParseError(f"integer {text} is out of the long range", pos, expression)
            tokens.append(Token("number", value, pos))
        elif kind == "str":
            tokens.append(Token("string", text[1:-1].replace("''", "'"), pos))
        elif kind == "id":
            upper = text.upper()
            tokens.append(Token(upper, upper, pos) if upper in KEYWORDS else Token("id", text, pos))
        elif kind == "op":
            tokens.append(Token(text, text, pos))
        pos = m.end()
    tokens.append(Token("end", None, end))
    return tokens


# ---------------------------------------------------------------- AST

class Node:
    """An AST node (a frozen dataclass); ``depth``, 1 for a leaf, bounds the evaluator's recursion."""

    depth = 1

    def __post_init__(self):
        children = [v for f in fields(self) for v in _nodes_in(getattr(self, f.name))]
        if children:
            object.__setattr__(self, "depth", 1 + max(child.depth for child in children))


def _nodes_in(value) -> tuple:
    if isinstance(value, Node):
        return (value,)
    return tuple(v for v in value if isinstance(v, Node)) if isinstance(value, tuple) else ()


@dataclass(frozen=True)
class Literal(Node):
    value: object  # int, float, str, bool or None (NULL)


@dataclass(frozen=True)
class Property(Node):
    name: str


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "-", "NOT", or "CONDITION": a property used where a condition is expected
    operand: Node


@dataclass(frozen=True)
class Logic(Node):
    op: str  # "AND" or "OR"
    operands: tuple


@dataclass(frozen=True)
class Compare(Node):
    op: str  # = <> > >= < <=
    left: Node
    right: Node


@dataclass(frozen=True)
class IsNull(Node):
    operand: Node
    negated: bool


@dataclass(frozen=True)
class Between(Node):
    operand: Node
    low: Node
    high: Node
    negated: bool


@dataclass(frozen=True)
class In(Node):
    operand: Property
    values: frozenset
    negated: bool


@dataclass(frozen=True)
class StringTest(Node):
    op: str  # CONTAINS, STARTSWITH or ENDSWITH
    operand: Node
    text: str
    negated: bool


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(node: Node) -> str:
    if isinstance(node, Literal):
        v = node.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        return repr(v) if isinstance(v, str) else str(v)
    if isinstance(node, Property):
        return node.name
    if isinstance(node, Unary) and node.op == "-":
        return f"-{_describe(node.operand)}"
    return "a condition"


def _is_condition(node: Node) -> bool:
    """Boolean-valued: a comparison, a logic operator, TRUE, FALSE or NULL."""
    if isinstance(node, Literal):
        return node.value is None or isinstance(node.value, bool)
    return not isinstance(node, Property) and not (isinstance(node, Unary) and node.op == "-")


# ---------------------------------------------------------------- parser

class _Parser:
    def __init__(self, expression: str):
        self.expression = expression
        self.tokens = tokenize(expression)
        self.i = 0
        self.nesting = 0

    # -- helpers

    @property
    def token(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def error(self, reason: str, pos: int | None = None) -> SqlParseError:
        return SqlParseError(reason, self.token.pos if pos is None else pos, self.expression)

    def expect(self, kind: str, what: str) -> Token:
        if self.token.kind != kind:
            raise self.error(f"expected {what}, found {self._found()}")
        return self.take()

    def _found(self) -> str:
        token = self.token
        if token.kind == "end":
            return "the end of the expression"
        if token.kind == "string":
            return f"string {token.value!r}"
        return f"{token.value!r}"

    def nested(self, node: Node, pos: int) -> Node:
        if node.depth > DEPTH_MAX:
            raise self.error(f"expression nests deeper than {DEPTH_MAX} levels", pos)
        return node

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > DEPTH_MAX:
            raise self.error(f"expression nests deeper than {DEPTH_MAX} levels", pos)

    def condition(self, node: Node, pos: int, context: str) -> Node:
        """``node`` as a condition (RocketMQ's asBooleanExpression)."""
        if _is_condition(node):
            return node
        if isinstance(node, Property):
            return Unary("CONDITION", node)
        raise self.error(f"{_describe(node)} is not a condition ({context})", pos)

    # -- grammar

    def parse(self) -> Node:
        start = self.token.pos
        if self.token.kind == "end":
            raise self.error("empty expression")
        node = self.or_expression()
        if self.token.kind != "end":
            raise self.error(f"unexpected {self._found()}")
        return self.condition(node, start, "the whole expression must be one")

    def or_expression(self) -> Node:
        return self._logic("OR", self.and_expression)

    def and_expression(self) -> Node:
        return self._logic("AND", self.not_expression)

    def _logic(self, op: str, operand: Callable[[], Node]) -> Node:
        pos = self.token.pos
        first = operand()
        if self.token.kind != op:
            return first
        operands = [self.condition(first, pos, f"operand of {op}")]
        while self.token.kind == op:
            self.take()
            pos = self.token.pos
            operands.append(self.condition(operand(), pos, f"operand of {op}"))
        return self.nested(Logic(op, tuple(operands)), pos)

    def not_expression(self) -> Node:
        if self.token.kind != "NOT":
            return self.equality()
        pos = self.take().pos
        self.enter(pos)
        operand_pos = self.token.pos
        operand = self.condition(self.not_expression(), operand_pos, "operand of NOT")
        self.nesting -= 1
        return self.nested(Unary("NOT", operand), pos)

    def equality(self) -> Node:
        left = self.comparison()
        while True:
            token = self.token
            if token.kind in ("=", "<>"):
                self.take()
                right = self.comparison()
                self._check_equal_operands(left, right, token)
                left = self.nested(Compare(token.kind, left, right), token.pos)
            elif token.kind == "IS":
                self.take()
                negated = self.token.kind == "NOT"
                if negated:
                    self.take()
                self.expect("NULL", "NULL after IS" + (" NOT" if negated else ""))
                left = self.nested(IsNull(left, negated), token.pos)
            else:
                return left

    def comparison(self) -> Node:
        left = self.unary()
        while True:
            token = self.token
            kind = token.kind
            negated = kind == "NOT" and self.peek().kind in ("BETWEEN", "IN") + STRING_TESTS
            if negated:
                self.take()
                kind = self.token.kind
                self.take()
            elif kind in (">", ">=", "<", "<=", "BETWEEN", "IN") + STRING_TESTS:
                self.take()
            else:
                return left
            if kind in (">", ">=", "<", "<="):
                right = self.unary()
                self._check_ordered(left, token)
                self._check_ordered(right, token)
                node = Compare(kind, left, right)
            elif kind == "BETWEEN":
                low = self.unary()
                self.expect("AND", "AND between the bounds of BETWEEN")
                high = self.unary()
                for operand in (left, low, high):
                    self._check_ordered(operand, token)
                if isinstance(low, Literal) and isinstance(high, Literal) and low.value > high.value:
                    raise self.error(f"BETWEEN bounds are reversed: {_describe(low)} > {_describe(high)}",
                                     token.pos)
                node = Between(left, low, high, negated)
            elif kind == "IN":
                if not isinstance(left, Property):
                    raise self.error(f"IN needs a property on its left, not {_describe(left)}", token.pos)
                self.expect("(", "'(' after IN")
                values = [self.expect("string", "a string literal in the IN list").value]
                while self.token.kind == ",":
                    self.take()
                    values.append(self.expect("string", "a string literal in the IN list").value)
                self.expect(")", "',' or ')' in the IN list")
                node = In(left, frozenset(values), negated)
            else:
                text = self.expect("string", f"a string literal after {kind}").value
                node = StringTest(kind, left, text, negated)
            left = self.nested(node, token.pos)

    def unary(self) -> Node:
        token = self.token
        if token.kind not in ("+", "-", "NOT"):
            return self.primary()
        self.take()
        self.enter(token.pos)
        operand_pos = self.token.pos
        operand = self.unary()
        self.nesting -= 1
        if token.kind == "+":
            if isinstance(operand, Literal) and not _is_number(operand.value):
                raise self.error(f"cannot apply '+' to {_describe(operand)}", token.pos)
            return operand
        if token.kind == "NOT":
            operand = self.condition(operand, operand_pos, "operand of NOT")
            return self.nested(Unary("NOT", operand), token.pos)
        if isinstance(operand, Literal):
            if not _is_number(operand.value):
                raise self.error(f"cannot negate {_describe(operand)}", token.pos)
            value = -operand.value
            if isinstance(value, int) and not LONG_MIN <= value <= LONG_MAX:
                raise self.error(f"integer {value} is out of the long range", token.pos)
            return Literal(value)
        if _is_condition(operand):
            raise self.error("cannot negate a condition", token.pos)
        return self.nested(Unary("-", operand), token.pos)

    def primary(self) -> Node:
        token = self.token
        kind = token.kind
        if kind == "number":
            self.take()
            if token.value == LONG_MAX + 1 and not (self.i >= 2 and self.tokens[self.i - 2].kind == "-"):
                raise self.error(f"integer {token.value} is out of the long range", token.pos)
            return Literal(token.value)
        if kind == "string":
            self.take()
            return Literal(token.value)
        if kind in ("TRUE", "FALSE"):
            self.take()
            return Literal(kind == "TRUE")
        if kind == "NULL":
            self.take()
            return Literal(None)
        if kind == "id":
            self.take()
            return Property(token.value)
        if kind == "(":
            self.take()
            self.enter(token.pos)
            node = self.or_expression()
            self.nesting -= 1
            self.expect(")", "')'")
            return node
        if kind == "end":
            raise self.error("unexpected end of the expression")
        raise self.error(f"expected a value, a property or '(', found {self._found()}")

    # -- RocketMQ's operand checks (ComparisonExpression.checkLessThanOperand / checkEqualOperand)

    def _check_ordered(self, node: Node, op: Token) -> None:
        if isinstance(node, Literal):
            if _is_number(node.value):
                return
            raise self.error(f"{_describe(node)} cannot be compared with {op.value} (numbers only)", op.pos)
        if _is_condition(node):
            raise self.error(f"a condition cannot be compared with {op.value}", op.pos)

    def _check_equal_operands(self, left: Node, right: Node, op: Token) -> None:
        for node in (left, right):
            if isinstance(node, Literal) and node.value is None:
                raise self.error(f"NULL cannot be compared with {op.value} (write IS NULL or IS NOT NULL)", op.pos)
        if isinstance(left, Literal) and isinstance(right, Literal):
            if isinstance(left.value, bool) != isinstance(right.value, bool):
                raise self.error(f"{_describe(left)} cannot be compared with {_describe(right)}", op.pos)


def parse(expression: str) -> Node:
    """The AST of ``expression``; raises SqlParseError."""
    if not isinstance(expression, str):
        raise SqlParseError("not a string", 0, repr(expression))
    return _Parser(expression).parse()


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
