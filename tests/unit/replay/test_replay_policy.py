from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import PolicyError, UnknownNameError
from sandbox.replay.judging.semantics import BOUNDARY_KINDS
from sandbox.replay.serving.policy import (
    DEFAULT_POLICIES,
    PolicySet,
    get_policy,
    parse_rule,
    parse_target,
    policy_names,
)


def test_registry_has_the_three_policies_with_distinct_behaviour() -> None:
    assert policy_names() == ["live", "recorded", "spy"]
    recorded, live, spy = get_policy("recorded"), get_policy("live"), get_policy("spy")
    assert recorded.serves_recording and not recorded.calls_live
    assert live.calls_live and not live.serves_recording and not live.reports_drift
    assert spy.calls_live and spy.reports_drift


def test_unknown_policy_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="unknown replay policy 'replayed'; valid: live, "):
        get_policy("replayed")


def test_defaults_follow_the_design() -> None:
    policies = PolicySet()
    assert {k: policies.policy_for(k, "x").name for k in BOUNDARY_KINDS} == {
        "llm": "recorded",
        "tool": "live",
        "http": "recorded",
        "retrieval": "live",
        "memory": "live",
        "clock": "recorded",
        "random": "recorded",
        "retry": "recorded",
        "timeout": "recorded",
    }


def test_later_rules_win_and_globs_match_names() -> None:
    policies = PolicySet.from_argv(
        ["--recorded", "tool", "--live", "tool:db.*", "--spy=tool:db.orders.insert"]
    )
    assert policies.policy_for("tool", "search").name == "recorded"
    assert policies.policy_for("tool", "db.orders.select").name == "live"
    assert policies.policy_for("tool", "db.orders.insert").name == "spy"
    assert policies.policy_for("llm", "chat").name == "recorded"  # default untouched
    # the same rules in the other order: the broad rule now wins over both
    flipped = PolicySet.from_pairs(
        [("spy", "tool:db.orders.insert"), ("live", "tool:db.*"), ("recorded", "tool")]
    )
    assert flipped.policy_for("tool", "db.orders.insert").name == "recorded"


def test_star_kind_and_colons_inside_the_glob() -> None:
    policies = PolicySet.from_rules(["live=*", "recorded=http:https://api.example.test/*"])
    assert policies.policy_for("llm", "chat").name == "live"
    assert policies.policy_for("http", "https://api.example.test/v1/pay").name == "recorded"
    assert policies.policy_for("http", "https://other.test/").name == "live"
    assert parse_target(" HTTP : https://x/* ") == ("http", "https://x/*")


def test_policy_option_form_keeps_order_with_the_others() -> None:
    policies = PolicySet.from_argv(["--policy", "live=llm", "--recorded", "llm:summarize"])
    assert policies.policy_for("llm", "chat").name == "live"
    assert policies.policy_for("llm", "summarize").name == "recorded"
    assert "rules (last wins): live=llm, recorded=llm:summarize" in policies.describe()


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (["--live"], PolicyError, "--live needs a value"),
        (["tool"], PolicyError, "unexpected 'tool'"),
        (["--live", "tools"], UnknownNameError, "unknown boundary kind 'tools'; valid: "),
        (["--live", "tool:"], PolicyError, "empty name glob"),
        (["--live", ":db"], PolicyError, "empty boundary kind"),
        (["--replay", "tool"], UnknownNameError, "unknown replay policy 'replay'"),
        (["--policy", "tool"], PolicyError, "has no '='"),
    ],
)
def test_bad_rules_are_clear_errors(argv: list[str], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        PolicySet.from_argv(argv)


def test_unknown_kind_lookup_and_bad_defaults() -> None:
    with pytest.raises(UnknownNameError, match="boundary kind 'result'"):
        PolicySet().policy_for("result", "")
    with pytest.raises(UnknownNameError, match="replay policy 'never'"):
        PolicySet(defaults={**DEFAULT_POLICIES, "llm": "never"})


def test_rule_str_round_trips() -> None:
    for text in ["live=tool:db.*", "spy=http", "recorded=*"]:
        assert str(parse_rule(text)) == text


names = st.sampled_from(["db.read", "db.write", "search", "pay.charge", ""])
globs = st.sampled_from(["*", "db.*", "*.write", "search", "pay.*", "?b.*"])
rules = st.lists(
    st.tuples(
        st.sampled_from(["recorded", "live", "spy"]),
        st.sampled_from(["tool", "llm", "*"]),
        globs,
    ),
    max_size=8,
)


@given(rules=rules, kind=st.sampled_from(["tool", "llm", "http"]), name=names)
def test_policy_is_the_last_matching_rule_or_the_default(
    rules: list[tuple[str, str, str]], kind: str, name: str
) -> None:
    policies = PolicySet.from_pairs((p, f"{k}:{g}") for p, k, g in rules)
    expected = DEFAULT_POLICIES[kind]
    for policy, rule_kind, glob in rules:
        if rule_kind in ("*", kind) and fnmatchcase(name, glob):
            expected = policy
    assert policies.policy_for(kind, name).name == expected
