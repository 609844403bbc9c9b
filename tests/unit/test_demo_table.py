"""``make demo``'s table at 80 columns: every line fits, run ids are never cut, the failure
and the first divergent step wrap with every word kept; without a width, one line a run."""

from __future__ import annotations

import re

from examples.demo import DemoRow, demo_table
from sandbox.replay.judging.verdict import ReplayOutcome, judge
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import ExceptionPredicate

RUN_IDS = ["orders-20261129T223104Z-a1b2c3", "inventory-20261129T223110Z-d4e5f6"]
FAILURE = "the payment gateway timed out after the order committed; the retry inserted it twice"
STEP = "step 7: call #2 of tool 'insert_order' in task 'main' differs"


def _rows() -> list[DemoRow]:
    predicate = ExceptionPredicate(type="DuplicateOrder")
    reproduced = judge(
        predicate, [ReplayOutcome(error=ErrorInfo(type="DuplicateOrder", message="twice"))] * 5
    )
    gone = judge(predicate, [ReplayOutcome(has_result=True, result={"ok": True})] * 5)
    return [
        DemoRow(RUN_IDS[0], FAILURE, reproduced, STEP),
        DemoRow(RUN_IDS[1], "stock went negative", gone, "(none)"),
    ]


def _words(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def test_demo_table_fits_80_columns_with_ids_whole() -> None:
    lines = demo_table(_rows(), 80)
    assert max(len(line) for line in lines) <= 80
    assert re.split(r"\s{2,}", lines[0].strip()) == [
        "run", "reproduced", "failure", "diverged at"
    ]  # fmt: skip
    first = next(i for i, line in enumerate(lines) if line.startswith(RUN_IDS[0] + " "))
    second = next(i for i, line in enumerate(lines) if line.startswith(RUN_IDS[1] + " "))
    assert "5/5 reproduced" in lines[first] and "0/5 gone" in lines[second]
    # the failure and the step wrap over several lines of the first run, every word kept
    assert second - first > 2
    failure_at = lines[0].index("failure")
    step_at = lines[0].index("diverged at")
    block = lines[first:second]
    assert _words([line[failure_at:step_at] for line in block]) == FAILURE
    assert _words([line[step_at:] for line in block]) == STEP
    assert "…" not in "".join(lines)


def test_demo_table_without_a_width_is_one_line_a_run() -> None:
    lines = demo_table(_rows(), None)
    assert len(lines) == 4
    assert lines[2].startswith(RUN_IDS[0]) and FAILURE in lines[2] and STEP in lines[2]


def test_make_demo_runs_the_module() -> None:
    """``make demo`` runs ``python -m examples.demo``: the module calls its ``main``."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "examples.demo", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m examples.demo")
