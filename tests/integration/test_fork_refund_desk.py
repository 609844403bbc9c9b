"""The three-step refund desk (examples/refund_desk.py) forked at its second step: one
override of the payment's status turns the failure off, another keeps it; ``sandbox diff``
compares each fork with its parent and names the overridden step."""

from __future__ import annotations

import html
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main as cli
from examples import _model
from examples import refund_desk as desk
from examples.capture_demo import _capture_checked, environ, production_db
from sandbox.replay import replay
from sandbox.replay.compare import compare_runs
from sandbox.replay.engine import ReplayReport
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import ForkEdits, ForkOverride
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker
TIMES = 3


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DirectoryStore, str]]:
    """Production: the payments service says ``settled`` (a stale cache) for a payment the
    ledger holds as not captured; the refund goes out."""

    def payments(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"order_id": body["order_id"], "status": "settled"}

    # The SDK is imported before the capture, as by an agent that imports it at the top: its
    # first import draws from os.urandom, which the capture records and later replays in
    # this process would not repeat.
    importlib.import_module("openai")

    store = DirectoryStore(tmp_path_factory.mktemp("refund-desk-store"))
    base, stop = _model.serve_http(payments, "payments-service")
    try:
        with production_db() as url, environ(DATABASE_URL=url, PAYMENTS_URL=base):
            desk.setup(url)
            run_id, failed = _capture_checked(
                store,
                "refunds",
                "examples.refund_desk:main",
                url,
                desk.main,
                desk.REFUND_OF_UNCAPTURED,
                "a refund was paid on a payment that was never captured",
            )
    finally:
        stop()
    assert failed
    yield store, run_id


def _step(store: DirectoryStore, run_id: str, tool: str) -> int:
    return next(e.seq for e in store.load_events(run_id) if e.kind == "tool" and e.name == tool)


def _fork(store: DirectoryStore, run_id: str, status: dict[str, Any]) -> ReplayReport:
    step = _step(store, run_id, "payment_status")
    edits = ForkEdits(overrides=[ForkOverride(step=step, value=status)])
    return replay(run_id, store=store, times=TIMES, fork=edits)


def test_the_capture_has_three_tool_steps(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    tools = [e.name for e in store.load_events(run_id) if e.kind == "tool"]
    assert tools == ["find_order", "payment_status", "issue_refund"]


def test_an_authorized_payment_turns_the_failure_off(
    captured: tuple[DirectoryStore, str],
) -> None:
    store, run_id = captured
    step = _step(store, run_id, "payment_status")
    report = _fork(store, run_id, {"order_id": 42, "status": "authorized"})
    assert (report.verdict.reproduced, report.verdict.gone, report.verdict.total) == (
        0,
        TIMES,
        TIMES,
    ), report.describe()
    assert report.exit_code == 0
    for fork_id in report.replays:
        manifest = store.load_manifest(fork_id)
        assert manifest.replay_of == run_id
        assert manifest.fork is not None and manifest.fork.overrides[0].step == step
        tools = [e for e in store.load_events(fork_id) if isinstance(e, ToolCall)]
        # the status came from the override (the tool did not run), no refund went out
        assert [(t.name, t.served) for t in tools] == [
            ("find_order", "live"),
            ("payment_status", "override"),
        ]
        comparison = compare_runs(store, run_id, fork_id)
        assert comparison.step == step, comparison.describe()
        assert any("inside overridden step" in note for note in comparison.notes)
        assert comparison.relation.startswith("B is a fork of A")
        div = comparison.divergence
        assert div is not None and div.reason == "changed"
        assert div.stream[1:] == ("tool", "payment_status")
        assert [(d.path, d.expected, d.actual) for d in div.diffs] == [
            ("response.output.status", "settled", "authorized")
        ]
        # the refund the parent made is a step only the parent has, and a row only it left
        assert [s.name for s in comparison.only_a if s.kind == "tool"] == ["issue_refund"]
        assert comparison.only_b == [] or all(s.kind != "tool" for s in comparison.only_b)
        assert [(d.status, d.path, d.expected) for d in comparison.end_state] == [
            ("missing", "tables.refunds[0]", {"id": "1", "order_id": "42", "amount": "30"})
        ], comparison.describe()


def test_a_settled_payment_keeps_the_failure(
    captured: tuple[DirectoryStore, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id = captured
    step = _step(store, run_id, "payment_status")
    report = _fork(store, run_id, {"order_id": 42, "status": "settled", "source": "by hand"})
    assert (report.verdict.reproduced, report.verdict.total) == (TIMES, TIMES), report.describe()
    assert report.exit_code == 1
    fork_id = report.replays[0]
    code = cli(["diff", run_id, fork_id, "--json", "--store", str(store.root)])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["step"] == step and data["same"] is False
    assert data["divergence"]["stream"][1:] == ["tool", "payment_status"]
    assert data["divergence"]["diffs"] == [
        {"path": "response.output.source", "change": "added", "actual": "by hand"}
    ]
    # The refund happened in both: the same tool steps, the same end state.
    assert data["only_a"] == [] and data["only_b"] == []
    assert data["end_state"] == []
    code = cli(["diff", run_id, fork_id, "--store", str(store.root)])
    text = capsys.readouterr().out
    assert code == 1 and f"first divergence at step {step}:" in text


def test_the_diff_page_of_a_fork_and_its_parent(
    captured: tuple[DirectoryStore, str], tmp_path: Path
) -> None:
    """``sandbox diff --report``: run A against run B, no verdict, the fork's relation, the
    divergent step and the refund row only the parent left."""
    store, run_id = captured
    fork_id = _fork(store, run_id, {"order_id": 42, "status": "authorized"}).replays[0]
    out = tmp_path / "diff.html"
    code = cli(["diff", run_id, fork_id, "--report", str(out), "--store", str(store.root)])
    assert code == 1
    page = html.unescape(out.read_text())
    assert f"{run_id} vs {fork_id}" in page
    assert 'id="verdict"' not in page
    assert "expected (run A)" in page and "actual (run B)" in page
    assert "B is a fork of A" in page
    assert "payment_status" in page and "authorized" in page
    assert "rows of table refunds" in page
