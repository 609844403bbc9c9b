"""The one-line predicate syntax of ``--fail-if`` and ``--predicate``: every form parses to
its model, writes back to text that parses to the same model, and bad text is one clear
error naming the forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import PredicateError
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    ExitCodePredicate,
    MarkedPredicate,
    Predicate,
    ResultPredicate,
    SQLInvariant,
)
from sandbox.snapshot.predicate_syntax import parse_predicate, predicate_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("exit!=0", ExitCodePredicate(op="ne", value=0)),
        ("exit == 3", ExitCodePredicate(op="eq", value=3)),
        ("exit=3", ExitCodePredicate(op="eq", value=3)),
        ("exit>1", ExitCodePredicate(op="gt", value=1)),
        ("exception=KeyError", ExceptionPredicate(type="KeyError")),
        (
            "exception=shop.errors.Declined:card declined",
            ExceptionPredicate(type="shop.errors.Declined", message_contains="card declined"),
        ),
        (
            "sql:db=SELECT id FROM t GROUP BY id HAVING count(*) > 1",
            SQLInvariant(service="db", query="SELECT id FROM t GROUP BY id HAVING count(*) > 1"),
        ),
        ('result:orders.1.sku == "A1"', ResultPredicate(path="orders.1.sku", op="eq", value="A1")),
        ("result:n > 2", ResultPredicate(path="n", op="gt", value=2)),
        (
            "result:answer contains 30 days",
            ResultPredicate(path="answer", op="contains", value="30 days"),
        ),
        ("result: != null", ResultPredicate(path="", op="ne", value=None)),
        ("result:a not_contains [1]", ResultPredicate(path="a", op="not_contains", value=[1])),
        ("marked", MarkedPredicate()),
        ("marked:stale price", MarkedPredicate(reason_contains="stale price")),
    ],
)
def test_forms(text: str, expected: Predicate) -> None:
    assert parse_predicate(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("exit~1", "exit OP NUMBER"),
        ("exit!=x", "exit OP NUMBER"),
        ("exception=", "not an exception type name"),
        ("exception=not a type", "not an exception type name"),
        ("sql:db", "sql:SERVICE=QUERY"),
        ("sql:db=  ", "sql:SERVICE=QUERY"),
        ("result:a", "result:PATH OP VALUE"),
        ("result:a ~ 1", "result:PATH OP VALUE"),
        ("status is bad", "unknown form"),
    ],
)
def test_bad_text_is_one_clear_error(text: str, why: str) -> None:
    with pytest.raises(PredicateError) as info:
        parse_predicate(text)
    message = str(info.value)
    assert why in message and "exit!=0 | exit==N | exception=Type[:message]" in message
    assert "\n" not in message


_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).map(
    str.strip
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
predicates = st.one_of(
    st.builds(
        ExitCodePredicate,
        op=st.sampled_from(["eq", "ne", "gt", "lt"]),
        value=st.integers(-255, 255),
    ),
    st.builds(
        ExceptionPredicate,
        type=st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True),
        message_contains=st.none() | _text.filter(bool),
    ),
    st.builds(
        SQLInvariant,
        service=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,10}", fullmatch=True),
        query=_text.filter(bool),
    ),
    st.builds(
        ResultPredicate,
        path=st.from_regex(r"[A-Za-z0-9_.-]{0,15}", fullmatch=True),
        op=st.sampled_from(["eq", "ne", "contains", "not_contains", "gt", "lt"]),
        value=_json,
    ),
    st.builds(MarkedPredicate, reason_contains=st.none() | _text.filter(bool)),
)


@given(predicates)
def test_text_round_trips(predicate: Predicate) -> None:
    assert parse_predicate(predicate_text(predicate)) == predicate
