"""A trial's outcome from its N runs: reproduced at the quorum, not reproduced only when the
inconclusive runs could not have reached it, inconclusive otherwise."""

from __future__ import annotations

import pytest

from sandbox.explain.trials import trial_outcome
from sandbox.replay.judging.verdict import Outcome, RunVerdict, Verdict
from sandbox.snapshot.manifest import ResultPredicate


def verdict(*outcomes: Outcome) -> Verdict:
    runs = tuple(
        RunVerdict(i, o, "", reason="exception" if o == "inconclusive" else None)
        for i, o in enumerate(outcomes)
    )
    return Verdict(ResultPredicate(path="x", op="eq", value=1), runs)


@pytest.mark.parametrize(
    ("outcomes", "quorum", "expected"),
    [
        (("reproduced", "reproduced"), 2, "reproduced"),
        (("reproduced", "gone"), 2, "not reproduced"),
        (("reproduced", "gone", "gone"), 2, "not reproduced"),
        (("reproduced", "gone", "reproduced"), 2, "reproduced"),
        (("gone", "gone"), 1, "not reproduced"),
        # an inconclusive run could have reproduced: the trial is not judged
        (("reproduced", "inconclusive"), 2, "inconclusive"),
        (("gone", "inconclusive"), 1, "inconclusive"),
        (("inconclusive", "inconclusive"), 2, "inconclusive"),
        # ... unless even then the quorum is out of reach
        (("gone", "gone", "inconclusive"), 2, "not reproduced"),
    ],
)
def test_trial_outcome(outcomes: tuple[Outcome, ...], quorum: int, expected: str) -> None:
    assert trial_outcome(verdict(*outcomes), quorum) == expected
