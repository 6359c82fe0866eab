"""SQL92 selectors, the syntax: tokens, the tree and the parser with RocketMQ's parse-time
refusals (the language and its semantics are described in ``sql92.py``). Pure, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Callable

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
