"""Delta debugging (Zeller and Hildebrandt's *ddmin*) over recorded conditions.

The question a trial answers: with only the conditions in ``kept`` held as recorded (every
other one released), does the failure still reproduce? :func:`ddmin` looks for a smallest
``kept`` set that does, testing chunks and their complements and refining the chunk size,
and returns a 1-minimal set when the budget lets it finish: releasing any one condition of
it no longer reproduces the failure.

A trial has three outcomes (:data:`TrialOutcome`). Only ``"reproduced"`` moves the search:
a set that reproduced is adopted. ``"not reproduced"`` and ``"inconclusive"`` both leave the
set as it was, so an inconclusive trial never releases a condition (ddmin's *unresolved*
outcome); which conditions of the answer the failure really needs, and which were only kept
because a trial without them could not be judged, is told apart afterwards from the trials'
outcomes (:func:`classify`).

The search is pure: trials are run by the ``trial`` callback, cached by set, and stop when
``afford`` says no trial is left in the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

TrialOutcome = Literal["reproduced", "not reproduced", "inconclusive"]
Trial = Callable[[frozenset[str]], TrialOutcome]
"""Runs one trial with only these conditions kept; returns its outcome."""


class BudgetSpent(Exception):
    """No trial is left in the replay budget."""


@dataclass
class Search:
    """The trials of one search, by the set of conditions they kept."""

    trial: Trial
    afford: Callable[[], bool]
    """Whether one more trial fits in the budget."""
    outcomes: dict[frozenset[str], TrialOutcome] = field(default_factory=dict)
    order: list[frozenset[str]] = field(default_factory=list)
    """The sets in the order their trials ran."""

    def test(self, kept: frozenset[str]) -> TrialOutcome:
        known = self.outcomes.get(kept)
        if known is not None:
            return known
        if not self.afford():
            raise BudgetSpent
        outcome = self.trial(kept)
        self.outcomes[kept] = outcome
        self.order.append(kept)
        return outcome


def _chunks(items: Sequence[str], n: int) -> list[list[str]]:
    size = len(items)
    return [list(items[i * size // n : (i + 1) * size // n]) for i in range(n)]


def ddmin(conditions: Sequence[str], search: Search) -> tuple[list[str], bool]:
    """A smallest subset of ``conditions`` (in their order) whose trial reproduces, and
    whether the search finished (``False``: the budget ran out first, and the set may not be
    minimal). The caller has checked that keeping every condition reproduces."""
    current = list(conditions)
    n = 2
    try:
        if search.test(frozenset()) == "reproduced":
            return [], True
        while len(current) >= 2:
            chunks = _chunks(current, n)
            adopted = False
            for chunk in chunks:
                if search.test(frozenset(chunk)) == "reproduced":
                    current, n, adopted = chunk, 2, True
                    break
            if not adopted:
                for chunk in chunks:
                    rest = [c for c in current if c not in chunk]
                    if search.test(frozenset(rest)) == "reproduced":
                        current, n, adopted = rest, max(n - 1, 2), True
                        break
            if not adopted:
                if n >= len(current):
                    break
                n = min(2 * n, len(current))
    except BudgetSpent:
        return current, False
    return current, True


Verdict = Literal["needed", "not needed", "unjudged", "untested"]


def classify(
    kept: Sequence[str],
    everything: Sequence[str],
    search: Search,
) -> Mapping[str, tuple[Verdict, frozenset[str] | None]]:
    """Why each condition of the answer ``kept`` is in it, with the trial that shows it:

    - ``needed``: a trial that released it (``kept`` without it, or else every condition but
      it) was judged and did not reproduce;
    - ``unjudged``: the trials that released it could not be judged (inconclusive): it is
      kept because nothing shows that the failure does without it;
    - ``untested``: the budget ran out before a trial released it;
    - ``not needed``: a trial that released it reproduced after all (the search stopped
      early, or the failure comes and goes).

    A trial of every condition but the one, when the first is inconclusive, is run here if
    the budget allows (it changes the least around the condition)."""
    out: dict[str, tuple[Verdict, frozenset[str] | None]] = {}
    for condition in kept:
        candidates = [
            frozenset(c for c in kept if c != condition),
            frozenset(c for c in everything if c != condition),
        ]
        verdict: tuple[Verdict, frozenset[str] | None] = ("untested", None)
        for trial_set in candidates:
            try:
                outcome = search.test(trial_set)
            except BudgetSpent:
                break
            if outcome == "not reproduced":
                verdict = ("needed", trial_set)
                break
            if outcome == "reproduced":
                verdict = ("not needed", trial_set)
                break
            verdict = ("unjudged", trial_set)
        out[condition] = verdict
    return out
