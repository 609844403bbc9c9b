"""The replay plan: its defaults, the checks made when it is built, and options set by name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sandbox.errors import ReplayError, SandboxError, UnknownNameError
from sandbox.replay import MissMode, PolicySet, ReplayPlan, replay
from sandbox.snapshot.predicate_syntax import parse_predicate
from sandbox.snapshot.store import DirectoryStore


def test_the_default_plan_replays_once_as_recorded() -> None:
    plan = ReplayPlan()
    assert (plan.times, plan.miss, plan.clocks, plan.enforce_order, plan.inject_faults) == (
        1,
        MissMode.FAIL,
        "frozen",
        True,
        True,
    )
    assert plan.served_by() == PolicySet()
    assert plan.entrypoint is plan.fork is plan.predicate is plan.timeout is plan.services is None


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"times": 0}, ReplayError, "times must be at least 1, got 0"),
        ({"clocks": "sundial"}, UnknownNameError, "clock mode"),
        ({"timeout": 0.0}, ReplayError, "timeout must be a positive number of seconds"),
        ({"miss": "sometimes"}, UnknownNameError, "miss mode"),
        (
            {"empty": ("db",), "services": {"db": "postgresql://db/app"}},
            ReplayError,
            "empty services need the sandbox",
        ),
    ],
)
def test_a_bad_plan_is_refused_when_it_is_built(
    options: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ReplayPlan(**options)  # type: ignore[arg-type]


def test_values_from_untyped_callers_take_the_plan_s_forms() -> None:
    """A generated test or a pytest marker gives a miss mode by name and lists."""
    plan = ReplayPlan(miss="live", empty=["db"], env={"A": "1"})  # type: ignore[arg-type]
    assert plan.miss is MissMode.LIVE
    assert plan.empty == ("db",)
    assert plan.env == {"A": "1"}


def test_options_by_name_are_set_over_a_plan_and_checked() -> None:
    plan = ReplayPlan(times=3, trust=True)
    changed = plan.with_options(times=5, clocks="live")
    assert (changed.times, changed.trust, changed.clocks) == (5, True, "live")
    assert plan.times == 3  # frozen: the first plan is unchanged
    assert changed.served_by().describe() == PolicySet().with_rule("live", "clock").describe()
    with pytest.raises(ReplayError, match="times must be at least 1"):
        plan.with_options(times=-1)
    with pytest.raises(UnknownNameError, match="tims") as raised:
        plan.with_options(tims=2)
    assert "times" in str(raised.value) and "policies" in str(raised.value)


def test_replay_refuses_an_unknown_option_before_reading_the_store(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="replay option"):
        replay("no-such-run", store=DirectoryStore(tmp_path), enforce_ordre=False)


def test_the_command_line_s_words_make_a_plan(tmp_path: Path) -> None:
    """``sandbox replay``'s text options: a predicate, variables, a services file, a fork's
    edits and the miss mode by name become the plan's values; the others pass as they are."""
    services = tmp_path / "services.json"
    services.write_text(json.dumps({"db": "postgresql://postgres@db:5432/app"}))
    plan = ReplayPlan.from_command_line(
        miss="position",
        predicate="exit!=0",
        services_file=services,
        env=["AGENT_MODEL=gpt-4o", "EMPTY="],
        until=4,
        overrides=['2={"ok": true}'],
        params=["temperature=0.2"],
        times=3,
        trust=True,
    )
    assert plan.miss is MissMode.POSITION
    assert plan.predicate == parse_predicate("exit!=0")
    assert plan.services == {"db": "postgresql://postgres@db:5432/app"}
    assert plan.env == {"AGENT_MODEL": "gpt-4o", "EMPTY": ""}
    assert plan.fork is not None
    assert (plan.fork.until, plan.fork.params) == (4, {"temperature": 0.2})
    assert [(o.step, o.value) for o in plan.fork.overrides] == [(2, {"ok": True})]
    assert (plan.times, plan.trust) == (3, True)
    assert ReplayPlan.from_command_line().fork is None  # no fork option: a plain replay


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ({"env": ["not a variable"]}, "--env 'not a variable': write NAME=VALUE"),
        ({"overrides": ["two=x"]}, "override 'two=x': write STEP=JSON or STEP=FILE"),
        ({"miss": "sometimes"}, "miss mode"),
        ({"services_file": "no-such-file.json"}, "cannot read services file"),
        ({"times": 0}, "times must be at least 1"),
    ],
)
def test_bad_words_on_the_command_line_are_one_clear_error(
    words: dict[str, Any], message: str
) -> None:
    with pytest.raises(SandboxError, match=re.escape(message)):
        ReplayPlan.from_command_line(**words)
