"""SQL92 subscriptions: expressions from the grammar (most of them valid), token soup and damaged
text compile or are refused with SqlParseError at a position inside the text; a compiled selector
evaluates any properties to TRUE, FALSE or unknown without raising, and its logic is three-valued
(``NOT`` swaps TRUE and FALSE and keeps unknown; ``AND``/``OR`` follow Kleene's tables)."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from rocketbox.cluster.filter import sql92
from rocketbox.cluster.filter.sql92 import SqlParseError, compile_sql
from tests.fuzz.budget import run_hypothesis
from tests.fuzz.strategies import mutated

_props = st.sampled_from(("a", "b", "TAGS", "KEYS", "x_1", "$c"))
_numbers = st.one_of(st.integers(-(1 << 64), 1 << 64).map(str), st.sampled_from((
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "1L", "1.5", ".5", "5e3", "1e400",
    "0", "00", "1E-400")), st.floats(allow_nan=False, allow_infinity=False).map(repr))
_strings = st.text(max_size=6).map(lambda s: "'" + s.replace("'", "''") + "'")
_operand = st.one_of(_props, _numbers, _strings, st.sampled_from(("TRUE", "FALSE", "NULL")))


def _compare(left, op, right) -> str:
    return f"{left} {op} {right}"


_leaf = st.one_of(
    st.builds(_compare, st.one_of(_operand, st.builds("-{}".format, _operand)),
              st.sampled_from(("=", "<>", ">", ">=", "<", "<=")), _operand),
    st.builds("{} IS {}NULL".format, _props, st.sampled_from(("", "NOT "))),
    st.builds("{} {}IN ({})".format, _props, st.sampled_from(("", "NOT ")),
              st.lists(_strings, min_size=1, max_size=3).map(", ".join)),
    st.builds("{} {}BETWEEN {} AND {}".format, _operand, st.sampled_from(("", "NOT ")), _operand, _operand),
    st.builds("{} {}{} {}".format, _props, st.sampled_from(("", "NOT ")),
              st.sampled_from(("CONTAINS", "STARTSWITH", "ENDSWITH")), st.one_of(_strings, _operand)),
    _props, st.sampled_from(("TRUE", "FALSE")))
expressions = st.recursive(_leaf, lambda inner: st.one_of(
    st.builds("({})".format, inner), st.builds("NOT {}".format, inner),
    st.builds("{} AND {}".format, inner, inner), st.builds("{} OR {}".format, inner, inner)), max_leaves=12)
_soup = st.lists(st.sampled_from(("a", "b", "NOT", "AND", "OR", "IS", "NULL", "IN", "BETWEEN", "TRUE", "FALSE",
                                  "CONTAINS", "=", "<>", ">", "(", ")", ",", "-", "+", "1", "2.5", "'x'", "/*",
                                  "*/", "--", "'", "!=", "\n", "1e", "..")), max_size=16).map(" ".join)
_values = st.one_of(_numbers, st.text(max_size=6), st.sampled_from(("true", "TRUE", "false", "NaN", "Infinity",
                                                                    "-0", "1f", "1d", "0x10", " 1", "")))
properties = st.dictionaries(_props, _values, max_size=6)


def _kleene_and(left, right):
    if left is False or right is False:
        return False
    return True if left is True and right is True else None


def _kleene_or(left, right):
    if left is True or right is True:
        return True
    return False if left is False and right is False else None


def _check_sql(value) -> None:
    text, props = value
    try:
        selector = compile_sql(text)
    except SqlParseError as error:
        assert 0 <= error.position <= len(text)
        return
    assert selector.matches(props) in (True, False)
    result = sql92.evaluate(selector.ast, props)
    # Each copy ends its line: a text may end in a "--" comment (SQL92 and ActiveMQ's selector
    # grammar), which would swallow the closing parenthesis after it.
    negated = compile_sql(f"NOT ({text}\n)")
    assert sql92.evaluate(negated.ast, props) == (None if result is None else not result)
    both = compile_sql(f"({text}\n) AND ({text}\n) OR ({text}\n)")
    assert sql92.evaluate(both.ast, props) == _kleene_or(_kleene_and(result, result), result)


@pytest.mark.fuzz(weight=1.5)
def test_sql92_expressions_compile_or_are_refused_and_evaluate_three_valued(fuzz_seconds):
    text = st.one_of(expressions, expressions, _soup, st.text(max_size=40),
                     mutated(expressions.map(str.encode)).map(lambda b: b.decode("utf-8", "replace")))
    run_hypothesis("sql92", fuzz_seconds, st.tuples(text, properties), _check_sql)
