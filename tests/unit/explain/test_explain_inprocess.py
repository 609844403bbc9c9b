"""``explain`` end to end on an in-process agent (no services, no Docker): a recorded tool
answer that the failure needs, a recorded timeout and a frozen clock that it does not.

The agent asks ``credit_limit`` for the account's limit (100 at capture; 500 today), through
a retry whose first attempt timed out, and blocks the order when the limit is under 200.
Replayed with the tool served from the recording (the baseline ``--recorded
tool:credit_limit``) it blocks again; with the tool live it does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tenacity

from cli.main import main
from sandbox import capture
from sandbox.explain import explain, load_explanation
from sandbox.replay import PolicySet, replay
from sandbox.report import render, replay_comparison
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

LIMIT = {"value": 100}
SLOW_FIRST_ATTEMPT = {"on": False}
BASELINE = PolicySet.from_pairs([("recorded", "tool:credit_limit")])


@capture.tool
def credit_limit(account: str) -> int:
    return LIMIT["value"]


def agent() -> dict[str, object]:
    attempts = {"n": 0}

    def attempt() -> int:
        attempts["n"] += 1
        if SLOW_FIRST_ATTEMPT["on"] and attempts["n"] == 1:
            raise TimeoutError("the limits service took too long")
        return credit_limit("acme")

    retrying = capture.Retrying(
        "limit",
        stop=tenacity.stop_after_attempt(3),
        retry=tenacity.retry_if_exception_type(TimeoutError),
        reraise=True,
    )
    limit = retrying(attempt)
    return {"blocked": limit < 200, "attempts": attempts["n"]}


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[DirectoryStore, str]]:
    store = DirectoryStore(tmp_path / "store")
    SLOW_FIRST_ATTEMPT["on"] = True
    try:
        with capture.run(
            "limits",
            store=store,
            seed=1,
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:agent"),
            packages=False,
        ) as rec:
            rec.set_result(agent())
            rec.mark_failed("order blocked", ResultPredicate(path="blocked", op="eq", value=True))
    finally:
        SLOW_FIRST_ATTEMPT["on"] = False
    LIMIT["value"] = 500  # the limit today
    try:
        yield store, rec.run_id
    finally:
        LIMIT["value"] = 100


def test_explain_names_the_recorded_tool_answer_and_releases_the_rest(
    run: tuple[DirectoryStore, str],
) -> None:
    store, run_id = run
    found = explain(run_id, store=store, times=2, budget=40, policies=BASELINE)
    assert found.status == "explained", found.describe()
    assert {c.key: c.verdict for c in found.conditions} == {
        "clock": "not needed",
        "faults": "not needed",
        "tool:credit_limit": "needed",
    }, found.describe()
    assert found.replays == 2 * len(found.trials) <= 40
    assert found.one_at_a_time == 2 * 4
    assert load_explanation(store, run_id) == found
    # each verdict names the trial that shows it: the tool released -> not reproduced
    (tool,) = found.of("needed")
    assert tool.evidence is not None
    shown = found.trials[tool.evidence - 1]
    assert "tool:credit_limit" in shown.released and shown.outcome == "not reproduced"
    text = found.describe()
    assert text.startswith("the failure needs: tool credit_limit served from the recording\n")
    assert "it does not need: the frozen clock" in text
    assert store.list() == [store.load_manifest(run_id)]  # the trials' replays are not kept


def test_the_replay_report_shows_what_the_failure_needs(run: tuple[DirectoryStore, str]) -> None:
    """Once explained, a replay's HTML page carries the explanation after its header."""
    store, run_id = run
    report = replay(run_id, store=store, policies=BASELINE)
    before = render(*replay_comparison(store, report))
    assert 'id="explain"' not in before
    explain(run_id, store=store, times=1, budget=10, policies=BASELINE)
    page = render(*replay_comparison(store, report))
    section = page[page.index('<section id="explain">') : page.index('<section id="divergence"')]
    assert "the failure needs: tool credit_limit served from the recording" in section
    assert "it does not need: the frozen clock" in section
    assert page.index('id="summary"') < page.index('id="explain"')


def test_faults_not_injected_run_the_attempt_live(run: tuple[DirectoryStore, str]) -> None:
    store, run_id = run
    injected = replay(run_id, store=store, policies=BASELINE)
    free = replay(run_id, store=store, policies=BASELINE, inject_faults=False)
    attempts = [
        [e.error is not None for e in store.load_events(r.replays[0]) if e.kind == "retry"]
        for r in (injected, free)
    ]
    assert attempts == [[True, False], [False]]  # the recorded timeout, then a success
    assert injected.injected and not free.injected
    assert free.verdict.reproduced == 1  # the recorded tool answer still blocks the order


def test_cli_explain_prints_stores_and_show_prints_it(
    run: tuple[DirectoryStore, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id = run
    args = ["--store", str(store.root), "--recorded", "tool:credit_limit", "--budget", "20"]
    assert main(["explain", run_id, *args]) == 1
    out = capsys.readouterr().out
    assert "the failure needs: tool credit_limit served from the recording" in out
    assert "a one-condition-at-a-time search would need 8 replays" in out
    assert main(["show", run_id, "--store", str(store.root)]) == 0
    shown = capsys.readouterr().out
    assert "explained   the failure needs: tool credit_limit served from the recording" in shown


def test_cli_explain_of_an_unknown_run_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "no-such-run", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sandbox: error: ")


def test_a_run_that_does_not_reproduce_is_not_explained(run: tuple[DirectoryStore, str]) -> None:
    """With the default policies the tool runs live (limit 500): nothing to explain."""
    store, run_id = run
    found = explain(run_id, store=store, times=2, budget=10)
    assert found.status == "not reproduced"
    assert len(found.trials) == 1 and found.replays == 2
    assert found.describe().startswith(
        "the failure did not reproduce with every recorded condition held (not reproduced"
    )
