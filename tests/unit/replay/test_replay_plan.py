"""The replay plan: its defaults, the checks made when it is built, and options set by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.errors import ReplayError, UnknownNameError
from sandbox.replay import MissMode, PolicySet, ReplayPlan, replay
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
