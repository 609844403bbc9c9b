"""``sandbox pytest``, ``sandbox ci-repro`` and an empty ``sandbox sweep`` through the CLI entry
point (fake replayer)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import sandbox.replay.engine
from cli.main import main
from sandbox.replay.judging.verdict import ReplayOutcome, Verdict, judge
from sandbox.snapshot import DirectoryStore, Manifest, Snapshot
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import ExceptionPredicate, Failure

PREDICATE = ExceptionPredicate(type="DuplicateOrder")


@dataclass
class Report:
    verdict: Verdict


def fill(store: DirectoryStore) -> None:
    for run_id in ("orders-1", "billing-1"):
        manifest = Manifest(
            run_id=run_id,
            created=datetime(2024, 3, 1, 12, tzinfo=UTC),
            status="complete",
            failure=Failure(reason=f"{run_id} went wrong", predicate=PREDICATE),
        )
        store.save(Snapshot(manifest))


def fake(reproducing: set[str], crash: str = "") -> object:
    def replay(run_id: str, *, store: DirectoryStore, times: int = 1, **kw: object) -> Report:
        bad = ReplayOutcome(error=ErrorInfo(type="DuplicateOrder", message="twice"))
        outcome = bad if run_id in reproducing else ReplayOutcome()
        if run_id == crash:
            outcome = ReplayOutcome(error=ErrorInfo(type="KeyError", message="'PRICING_URL'"))
        return Report(judge(PREDICATE, [outcome] * times))

    return replay


def test_pytest_command_writes_the_test(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(store)
    out = tmp_path / "tests" / "regressions" / "test_orders_1.py"
    args = ["pytest", "orders-1", "-o", str(out), "--store", str(store.root), "--times", "4"]
    assert main(args) == 0
    tree = ast.parse(out.read_text())
    assert "orders-1 went wrong" in (ast.get_docstring(tree) or "")
    assert "TIMES = 4" in out.read_text()
    assert main(args) == 2  # exists: refused without --force
    assert "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert main(["pytest", "nope", "-o", str(out), "--store", str(store.root)]) == 2


def test_ci_repro_exit_codes(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """1 when every captured failure reproduced, 0 when one is gone, 2 when one could not be
    judged: a crashed replay is never counted as gone."""
    fill(store)
    monkeypatch.setattr(sandbox.replay.engine, "replay", fake({"orders-1", "billing-1"}))
    assert main(["ci-repro", "--store", str(store.root), "--times", "2"]) == 1
    assert "all 2 failure(s) still reproduce" in capsys.readouterr().err

    monkeypatch.setattr(sandbox.replay.engine, "replay", fake({"orders-1"}))
    assert main(["ci-repro", "--store", str(store.root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["run"]: c["outcome"] for c in data["checks"]} == {
        "orders-1": "reproduced",
        "billing-1": "gone",
    }
    assert main(["ci-repro", "--store", str(store.root)]) == 0
    captured = capsys.readouterr()
    assert "LOST: gone" in captured.out
    assert "1 expected reproduction(s) lost: 1 gone, 0 could not be judged" in captured.err

    monkeypatch.setattr(sandbox.replay.engine, "replay", fake({"orders-1"}, crash="billing-1"))
    assert main(["ci-repro", "--store", str(store.root)]) == 2
    captured = capsys.readouterr()
    assert "LOST: could not judge" in captured.out and "KeyError" in captured.out
    assert "1 expected reproduction(s) lost: 0 gone, 1 could not be judged" in captured.err


def test_sweep_of_an_empty_store_says_so_without_starting_ray(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No captured failure: the same line as ci-repro, exit 0, and no Ray cluster."""
    import sandbox.sweep

    def no_ray(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a sweep of nothing started Ray")

    monkeypatch.setattr(sandbox.sweep, "sweep", no_ray)
    assert main(["sweep", "--store", str(store.root)]) == 0
    assert "no captured failures in the store" in capsys.readouterr().err
    assert main(["sweep", "--store", str(store.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"exit_code": 0, "runs": []}


def test_sweep_prints_each_verdict_whole_when_piped(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Piped, the sweep's table is one line a run with the verdict uncut, and progress goes
    to stderr a line a replay (a terminal gets a bar instead)."""
    import sandbox.sweep
    from sandbox.sweep import SweepProgress, SweepRun

    fill(store)
    replay = fake({"orders-1"})

    def local_sweep(manifests: list[Manifest], *, times: int, progress: Any, **_: object) -> Any:
        done = []
        for i, manifest in enumerate(manifests):
            verdict = replay(manifest.run_id, store=store, times=times).verdict  # type: ignore[operator]
            progress(SweepProgress(i + 1, len(manifests), manifest.run_id, verdict.outcome))
            done.append(SweepRun(manifest, verdict))
        return done

    monkeypatch.setattr(sandbox.sweep, "sweep", local_sweep)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["sweep", "--store", str(store.root), "--times", "3"]) == 0  # one is gone
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    summaries = {
        m.run_id: replay(m.run_id, store=store, times=3).verdict.summary()  # type: ignore[operator]
        for m in store.list()
    }
    for run_id, summary in summaries.items():
        (row,) = [line for line in lines if line.startswith(run_id)]
        assert summary in row
    assert "orders-1: reproduced (" in captured.err and "billing-1: gone (" in captured.err
