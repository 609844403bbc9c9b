from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sandbox.replay.judging.jsondiff import MISSING, contrast, format_diffs, json_diff, json_equal

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_paths_read_like_code() -> None:
    diffs = json_diff(
        {"messages": [{"content": "a"}, {"content": "b"}], "weird key": 1, "gone": 0},
        {"messages": [{"content": "a"}, {"content": "B"}], "weird key": 2, "new": True},
    )
    assert [(d.path, d.change) for d in diffs] == [
        ("messages[1].content", "changed"),
        ('["weird key"]', "changed"),
        ("gone", "removed"),
        ("new", "added"),
    ]
    assert diffs[2].to_json() == {"path": "gone", "change": "removed", "expected": 0}


def test_an_inserted_list_item_is_one_added_item() -> None:
    before = [{"role": "user", "content": str(i)} for i in range(5)]
    after = [*before[:2], {"role": "tool", "content": "x"}, *before[2:]]
    diffs = json_diff(before, after)
    assert len(diffs) == 1
    assert diffs[0].path == "[2]"
    assert diffs[0].expected is MISSING
    assert diffs[0].actual == {"role": "tool", "content": "x"}


def test_true_is_not_one() -> None:
    assert not json_equal(True, 1)
    assert json_diff({"a": True}, {"a": 1})
    assert json_equal(1, 1.0)


def test_long_strings_are_cut_around_the_change() -> None:
    a = "Please refund order 42 for customer Alice, who wrote on Monday about a broken kettle."
    b = a.replace("order 42", "order 43")
    left, right = contrast(a, b, width=60)
    assert "4[2]" in left and "4[3]" in right
    assert len(left) < len(a)
    line = json_diff({"content": a}, {"content": b})[0].describe()
    assert line.startswith("content: ") and "[2]" in line and "[3]" in line


def test_format_limits_lines() -> None:
    diffs = json_diff(list(range(20)), list(range(100, 120)))
    text = format_diffs(diffs, limit=3)
    assert text.count("\n") == 3 and text.endswith("... and 17 more differences")


@given(json_values)
def test_a_value_has_no_diff_with_itself(value: Any) -> None:
    assert json_diff(value, value) == []


@given(json_values, json_values)
def test_no_diff_exactly_when_equal(a: Any, b: Any) -> None:
    assert (json_diff(a, b) == []) == json_equal(a, b)
