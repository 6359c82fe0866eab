"""SQL92 subscriptions (cluster/filter/sql92.py): every operator, precedence, NULL semantics, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from rocketbox.cluster.filter import sql92
from rocketbox.cluster.filter.sql92 import SqlParseError, compile_sql, evaluate, parse


def matches(expression: str, **properties) -> bool:
    return compile_sql(expression).matches(properties)


def value(expression: str, **properties):
    """The three-valued result: True, False or None (unknown)."""
    return evaluate(parse(expression), properties)


@pytest.mark.parametrize("expression, properties, expected", [
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "6"}, False),
    ("a <> 5", {"a": "6"}, True),
    ("a <> 5", {"a": "5"}, False),
    ("a > 5", {"a": "6"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a >= 5", {"a": "5"}, True),
    ("a >= 5", {"a": "4"}, False),
    ("a < 5", {"a": "4"}, True),
    ("a < 5", {"a": "5"}, False),
    ("a <= 5", {"a": "5"}, True),
    ("a <= 5", {"a": "6"}, False),
    ("5 < a", {"a": "6"}, True),
    ("a > b", {"a": "10", "b": "9"}, True),          # two properties: numbers, not "10" < "9"
    ("a BETWEEN 1 AND 3", {"a": "1"}, True),
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a BETWEEN 1 AND 3", {"a": "3.5"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "0"}, True),
    ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
    ("a BETWEEN -3 AND -1", {"a": "-2"}, True),
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a IN ('x', 'y')", {"a": "z"}, False),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x', 'y')", {"a": "x"}, False),
    ("a IN ('5')", {"a": "5"}, True),
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": ""}, False),
    ("a IS NOT NULL", {"a": ""}, True),
    ("a IS NOT NULL", {}, False),
    ("a = 'x'", {"a": "x"}, True),
    ("a = 'x'", {"a": "X"}, False),
    ("a <> 'x'", {"a": "y"}, True),
    ("'x' = a", {"a": "x"}, True),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("a = b", {"a": "x", "b": "x"}, True),
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "TRUE"}, True),
    ("a = FALSE", {"a": "false"}, True),
    ("a = FALSE", {"a": "true"}, False),
    ("a", {"a": "true"}, True),                         # a property as a condition
    ("a", {"a": "yes"}, False),
    ("a CONTAINS 'ell'", {"a": "hello"}, True),
    ("a NOT CONTAINS 'ell'", {"a": "hello"}, False),
    ("a STARTSWITH 'he'", {"a": "hello"}, True),
    ("a NOT STARTSWITH 'he'", {"a": "hello"}, False),
    ("a ENDSWITH 'lo'", {"a": "hello"}, True),
    ("a NOT ENDSWITH 'x'", {"a": "hello"}, True),
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, True),
    ("TAGS IN ('TagA', 'TagB') AND a BETWEEN 0 AND 3", {"TAGS": "TagB", "a": "2"}, True),
])
def test_operators(expression, properties, expected):
    assert compile_sql(expression).matches(properties) is expected


def test_numbers_long_double_suffix_exponent():
    assert matches("a = 5L", a="5")
    assert matches("a = 1.5", a="1.5")
    assert matches("a = .5", a="0.5")
    assert matches("a = 5.", a="5")
    assert matches("a = 5e3", a="5000")
    assert matches("a = 1.5E-1", a="0.15")
    assert matches("a > 2.5", a="3")
    assert matches("a = 5", a="5.0")             # compared as numbers: 5.0 == 5
    assert matches("a > -1", a="0")
    assert matches("a = +5", a="5")
    assert matches("a = 9223372036854775807", a="9223372036854775807")
    assert matches("a = -9223372036854775808", a="-9223372036854775808")
    assert matches("-a = 5", a="-5")             # a numeric value negates


def test_strings_equal_exactly_and_order_only_as_numbers():
    assert not matches("a = '5.0'", a="5")       # string equality: no number conversion
    assert matches("a = '5'", a="5")
    assert value("a > 5", a="abc") is None       # not a number: unknown, so not delivered
    assert value("a = 5", a="abc") is None
    assert value("a > b", a="x", b="y") is None  # strings do not order
    assert not matches("NOT (a > 5)", a="abc")


def test_precedence_or_and_not_and_parentheses():
    assert matches("a = 1 OR b = 2 AND c = 3", a="1")               # AND binds tighter than OR
    assert not matches("(a = 1 OR b = 2) AND c = 3", a="1")
    assert matches("NOT a = 1 AND b = 2", a="2", b="2")               # (NOT (a = 1)) AND (b = 2)
    assert not matches("NOT (a = 1 AND b = 2)", a="1", b="2")
    assert matches("NOT a > 5", a="3")                                # SQL: NOT (a > 5)
    assert matches("NOT NOT a = 1", a="1")
    assert matches("TRUE = NOT FALSE")                                # NOT as an operand
    assert matches("a > 1 = TRUE", a="2")                             # comparisons bind tighter than =
    assert matches("a = 1 AND b = 2 AND c = 3 OR d = 4", d="4")
    assert matches("a BETWEEN 1 AND 3 AND b = 1", a="2", b="1")      # the BETWEEN's AND is its own
    assert matches("lower = 1 and UPPER = 2 Or x IS null", lower="1")
    assert matches("a = 1 and b = 2", a="1", b="2")                   # keywords in any case
    assert matches("a=1 -- a comment\n AND /* another */ b=2", a="1", b="2")


def test_null_semantics_are_three_valued():
    assert value("a = 1") is None
    assert value("a <> 1") is None
    assert value("NOT (a = 1)") is None
    assert value("a > 1") is None
    assert value("a BETWEEN 1 AND 2") is None
    assert value("a NOT BETWEEN 1 AND 2") is None
    assert value("a IN ('x')") is None
    assert value("a NOT IN ('x')") is None
    assert value("a = b", a="x") is None
    assert value("a") is None
    assert value("a = 1 AND FALSE") is False       # unknown AND FALSE = FALSE
    assert value("a = 1 AND TRUE") is None
    assert value("a = 1 OR TRUE") is True          # unknown OR TRUE = TRUE
    assert value("a = 1 OR FALSE") is None
    assert value("NULL OR TRUE") is True
    assert value("a IS NULL") is True
    assert value("a CONTAINS 'x'") is False        # RocketMQ: FALSE, not unknown
    assert value("a NOT CONTAINS 'x'") is False
    assert not matches("a <> 1")                   # a missing property is never "different"
    assert matches("a IS NULL OR a <> 1")


def test_mixed_types_and_values():
    assert value("-a = -3", a="3") is True
    assert value("-a = -3", a="x") is None
    assert value("a = TRUE", a="maybe") is None
    assert value("a = 1", a="1.0") is True
    assert value("a = 1.5", a="3e-1") is False


@pytest.mark.parametrize("expression, reason, position", [
    ("", "empty expression", 0),
    ("   ", "empty expression", 3),
    ("a >", "unexpected end of the expression", 3),
    ("a > 'x'", "'x' cannot be compared with > (numbers only)", 2),
    ("a < TRUE", "TRUE cannot be compared with <", 2),
    ("(a = 1) > 2", "a condition cannot be compared with >", 8),
    ("a = NULL", "NULL cannot be compared with = (write IS NULL or IS NOT NULL)", 2),
    ("NULL <> a", "NULL cannot be compared with <>", 5),
    ("TRUE = 'x'", "TRUE cannot be compared with 'x'", 5),
    ("5", "5 is not a condition", 0),
    ("-a", "-a is not a condition", 0),
    ("'x'", "'x' is not a condition", 0),
    ("a = 1 AND 5", "5 is not a condition (operand of AND)", 10),
    ("NOT 'x'", "'x' is not a condition (operand of NOT)", 4),
    ("5 IN ('x')", "IN needs a property on its left", 2),
    ("a IN (1)", "expected a string literal in the IN list, found 1", 6),
    ("a IN ('x' 'y')", "expected ',' or ')' in the IN list", 10),
    ("a IN ()", "expected a string literal in the IN list", 6),
    ("a BETWEEN 3 AND 1", "BETWEEN bounds are reversed: 3 > 1", 2),
    ("a BETWEEN NULL AND 1", "NULL cannot be compared with BETWEEN", 2),
    ("a BETWEEN 1 OR 2", "expected AND between the bounds of BETWEEN", 12),
    ("a IS 5", "expected NULL after IS, found 5", 5),
    ("a IS NOT 5", "expected NULL after IS NOT", 9),
    ("(a = 1", "expected ')'", 6),
    ("a = 1)", "unexpected ')'", 5),
    ("a = 1 b", "unexpected 'b'", 6),
    ("a = 'x", "unterminated string literal", 4),
    ("a = 1 /* x", "unterminated comment", 6),
    ("a != 1", "unexpected '!=' (write <>)", 2),
    ("a ! 1", "unexpected character '!'", 2),
    ("a = \"x\"", "unexpected character '\"'", 4),
    ("a.b = 1", "unexpected character '.'", 1),
    ("-'x' = a", "cannot negate 'x'", 0),
    ("a = -TRUE", "cannot negate TRUE", 4),
    ("-(a = 1)", "cannot negate a condition", 0),
    ("a = 9223372036854775808", "integer 9223372036854775808 is out of the long range", 4),
    ("a = 1e999", "out of the double range", 4),
    ("a CONTAINS 5", "expected a string literal after CONTAINS", 11),
    ("a > 1d", "unexpected 'd'", 5),
    ("AND", "expected a value, a property or '(', found 'AND'", 0),
])
def test_invalid_expressions_say_why_and_where(expression, reason, position):
    with pytest.raises(SqlParseError) as info:
        compile_sql(expression)
    assert reason in info.value.reason
    assert info.value.position == position
    assert f"at position {position}" in str(info.value)


def test_nesting_is_bounded():
    deep = "(" * 100 + "a = 1" + ")" * 100
    with pytest.raises(SqlParseError, match="nests deeper than"):
        compile_sql(deep)
    with pytest.raises(SqlParseError, match="nests deeper than"):
        compile_sql("NOT " * 100 + "a = 1")
    with pytest.raises(SqlParseError, match="nests deeper than"):
        compile_sql("a = 1" + " = TRUE" * 100)
    shallow = "(" * 20 + "a = 1" + ")" * 20
    assert matches(shallow, a="1")
    # A long flat chain is not deep: AND/OR operands are one level.
    many = " OR ".join(f"a = {i}" for i in range(2000))
    assert matches(many, a="1999")


def test_compiled_expressions_and_failures_are_cached():
    assert compile_sql("a = 1") is compile_sql("a = 1")
    with pytest.raises(SqlParseError) as first:
        compile_sql("a = = 1")
    with pytest.raises(SqlParseError) as second:
        compile_sql("a = = 1")
    assert first.value is second.value


def test_long_expressions_are_shortened_in_the_message():
    long = "a = 1 AND " * 100 + "b >"
    with pytest.raises(SqlParseError) as info:
        compile_sql(long)
    assert len(str(info.value)) < 400


_words = st.sampled_from(["a", "b", "TAGS", "NOT", "AND", "OR", "IS", "NULL", "IN", "BETWEEN", "TRUE", "FALSE",
                          "CONTAINS", "=", "<>", ">", ">=", "<", "<=", "(", ")", ",", "-", "+", "1", "2.5",
                          "'x'", "'y'", "9223372036854775808", "/*", "--", "'"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_words, max_size=14), st.dictionaries(st.sampled_from(["a", "b", "TAGS"]),
                                                      st.sampled_from(["1", "2.5", "x", "true", ""])))
def test_any_token_soup_parses_or_is_refused_cleanly(words, properties):
    try:
        selector = compile_sql(" ".join(words))
    except SqlParseError:
        return
    assert selector.matches(properties) in (True, False)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_text_parses_or_is_refused_cleanly(text):
    try:
        sql92.parse(text)
    except SqlParseError as error:
        assert 0 <= error.position <= len(text)
