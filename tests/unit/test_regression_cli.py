"""``sandbox pytest`` and ``sandbox ci-repro`` through the CLI entry point (fake replayer)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

import sandbox.replay.engine
from cli.main import main
from sandbox.replay.verdict import ReplayOutcome, Verdict, judge
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


def fake(reproducing: set[str]) -> object:
    def replay(run_id: str, *, store: DirectoryStore, times: int = 1, **kw: object) -> Report:
        bad = ReplayOutcome(error=ErrorInfo(type="DuplicateOrder", message="twice"))
        outcome = bad if run_id in reproducing else ReplayOutcome()
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
    fill(store)
    monkeypatch.setattr(sandbox.replay.engine, "replay", fake({"orders-1", "billing-1"}))
    assert main(["ci-repro", "--store", str(store.root), "--times", "2"]) == 0
    assert "all 2 failure(s) still reproduce" in capsys.readouterr().err

    monkeypatch.setattr(sandbox.replay.engine, "replay", fake({"orders-1"}))
    assert main(["ci-repro", "--store", str(store.root), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {c["run"]: c["ok"] for c in data["checks"]} == {"orders-1": True, "billing-1": False}
    assert main(["ci-repro", "--store", str(store.root)]) == 1
    captured = capsys.readouterr()
    assert "LOST" in captured.out and "1 expected reproduction(s) lost" in captured.err
