"""The report reads as the run's conversation: random draws (an Agents SDK run draws a dozen
``uuid4`` before its first model call) fold into their step or one collapsed row, and an
inconclusive run's reason is shown whole in the header."""

from __future__ import annotations

import html
import itertools
import re
from pathlib import Path

import pytest

from sandbox.replay import ReplayReport
from sandbox.report import render, replay_comparison
from sandbox.report.steps import page_data
from sandbox.snapshot.events import RandomDraw
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.store import DirectoryStore
from tests.unit.report_runs import Captured, capture_orders


@pytest.fixture(scope="module")
def agents_run(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    from examples import openai_agents_responses_agent
    from sandbox import capture

    store = DirectoryStore(tmp_path_factory.mktemp("agents") / "store")
    with capture.run("refunds", store=store, packages=False) as rec:
        openai_agents_responses_agent.main()
    return store.load(rec.run_id)


def test_random_draws_fold_into_one_row_between_the_model_calls(agents_run: Snapshot) -> None:
    draws = [e for e in agents_run.events if isinstance(e, RandomDraw)]
    first_call = next(e.seq for e in agents_run.events if e.kind == "llm")
    # the SDK's ids crowd the conversation (how many depends on what the process imported
    # before: a library's draws as it is imported are not the run's)
    assert len([d for d in draws if d.seq < first_call]) >= 2
    data = page_data(agents_run, "original", None)
    steps = data["steps"]
    roots = [steps[r] for r in data["roots"]]
    kinds = [s["k"] for s in roots]
    first_llm = kinds.index("llm")
    assert kinds[:first_llm] == ["random"]  # every draw before the first model call: one row
    assert all(a != b or a != "random" for a, b in itertools.pairwise(kinds))
    folded = [d["q"] for s in steps for d in s.get("r", [])]
    assert sorted(folded) == [e.seq for e in draws]  # each draw listed once, none lost
    assert not [s for s in steps if s["k"] == "random" and "r" not in s]  # no draw is a step
    assert re.fullmatch(r"\d+ draws: .*uuid4.*", roots[0]["n"])  # named by their sources


def test_the_divergent_draw_stays_a_step(agents_run: Snapshot) -> None:
    draw = next(e for e in agents_run.events if isinstance(e, RandomDraw) and e.source == "uuid4")
    steps = page_data(agents_run, "replay", draw.seq)["steps"]
    assert [s["q"] for s in steps if s["k"] == "random" and "r" not in s] == [draw.seq]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> tuple[Captured, ReplayReport]:
    captured = capture_orders(tmp_path_factory.mktemp("orders"))
    return captured, captured.replay("main_broken")


def test_an_inconclusive_reason_is_shown_whole_and_wraps(
    broken: tuple[Captured, ReplayReport],
) -> None:
    captured, report = broken
    assert report.verdict.outcome == "inconclusive"
    (run,) = report.verdict.runs
    page = render(*replay_comparison(captured.store, report))
    found = re.search(r'<p class="why-detail" id="why-detail">(.*?)</p>', page, re.S)
    assert found is not None and html.unescape(found.group(1)) == run.detail
    assert len(run.detail) > 100  # a long reason, whole
    css = re.search(r"\.verdict\{([^}]*)\}", page)
    assert css is not None and "flex-wrap:wrap" in css.group(1)
    assert "inline-flex" not in css.group(1)


def test_a_reproduced_or_gone_header_has_no_reason_line(
    tmp_path: Path, broken: tuple[Captured, ReplayReport]
) -> None:
    captured, _ = broken
    page = render(*replay_comparison(captured.store, captured.replay("main")))
    assert 'class="why-detail"' not in page
