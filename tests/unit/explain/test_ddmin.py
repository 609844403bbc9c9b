"""ddmin over condition keys, with trials decided by a rule (the search is pure)."""

from __future__ import annotations

from collections.abc import Callable

from sandbox.explain.ddmin import Search, TrialOutcome, classify, ddmin

KEYS = ["clock", "order", "faults", "llm", "http", "tool-a", "tool-b", "file-x"]


def search(rule: Callable[[frozenset[str]], TrialOutcome], budget: int = 100) -> Search:
    ran: list[frozenset[str]] = []

    def trial(kept: frozenset[str]) -> TrialOutcome:
        ran.append(kept)
        return rule(kept)

    return Search(trial, lambda: len(ran) < budget)


def test_one_needed_condition_is_found_and_the_rest_released() -> None:
    s = search(lambda kept: "reproduced" if "faults" in kept else "not reproduced")
    kept, finished = ddmin(KEYS, s)
    assert (kept, finished) == (["faults"], True)
    assert classify(kept, KEYS, s) == {"faults": ("needed", frozenset())}


def test_two_conditions_needed_together() -> None:
    s = search(lambda kept: "reproduced" if {"order", "file-x"} <= kept else "not reproduced")
    kept, finished = ddmin(KEYS, s)
    assert (sorted(kept), finished) == (["file-x", "order"], True)
    verdicts = classify(kept, KEYS, s)
    assert {k: v[0] for k, v in verdicts.items()} == {"order": "needed", "file-x": "needed"}


def test_nothing_needed_when_releasing_everything_reproduces() -> None:
    s = search(lambda kept: "reproduced")
    assert ddmin(KEYS, s) == ([], True)
    assert s.order == [frozenset()]


def test_an_inconclusive_trial_never_releases_a_condition() -> None:
    """Without ``file-x`` the agent cannot run (inconclusive); the failure needs ``faults``.
    ``file-x`` stays in the answer, marked unjudged, with the trial that showed it."""

    def rule(kept: frozenset[str]) -> TrialOutcome:
        if "file-x" not in kept:
            return "inconclusive"
        return "reproduced" if "faults" in kept else "not reproduced"

    s = search(rule)
    kept, finished = ddmin(KEYS, s)
    assert (sorted(kept), finished) == (["faults", "file-x"], True)
    verdicts = classify(kept, KEYS, s)
    assert verdicts["faults"] == ("needed", frozenset({"file-x"}))
    assert verdicts["file-x"][0] == "unjudged"
    # both the trial without it alone and every condition but it were tried
    assert frozenset(k for k in KEYS if k != "file-x") in s.outcomes


def test_a_needed_condition_is_confirmed_by_the_trial_with_everything_else_held() -> None:
    """When the trial without it (here: with nothing held) cannot be judged, the trial that
    releases only it, everything else held, decides."""

    def rule(kept: frozenset[str]) -> TrialOutcome:
        if not kept:
            return "inconclusive"
        return "reproduced" if "file-x" in kept else "not reproduced"

    s = search(rule)
    kept, _ = ddmin(KEYS, s)
    assert kept == ["file-x"]
    everything_else = frozenset(k for k in KEYS if k != "file-x")
    assert classify(kept, KEYS, s)["file-x"] == ("needed", everything_else)


def test_the_budget_stops_the_search_and_says_so() -> None:
    s = search(lambda kept: "reproduced" if "faults" in kept else "not reproduced", budget=3)
    kept, finished = ddmin(KEYS, s)
    assert (kept, finished) == (["clock", "order", "faults", "llm"], False)
    assert len(s.order) == 3
    assert classify(kept, KEYS, s) == {k: ("untested", None) for k in kept}
