"""The committed demo snapshot (``snapshots/demo-orders-duplicate``) replays from a fresh
clone: the README's ``make replay RUN=demo-orders-duplicate``, through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from examples.capture_demo import DEMO_RUN_ID


@pytest.fixture
def store(committed_snapshots: Path) -> Path:
    """A copy of the committed store: replays write runs, and the repository stays clean."""
    return committed_snapshots


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return int(code or 0), captured.out + captured.err


def test_the_committed_snapshot_is_small_and_machine_free(committed_snapshots: Path) -> None:
    run = committed_snapshots / "runs" / DEMO_RUN_ID
    assert (run / "manifest.json").is_file() and (run / "events.jsonl").is_file()
    size = sum(p.stat().st_size for p in committed_snapshots.rglob("*") if p.is_file())
    assert size < 100_000, f"snapshots/ holds {size} bytes"
    manifest = (run / "manifest.json").read_text()
    assert '"cwd": "."' in manifest and '"HOME"' not in manifest and '"PATH"' not in manifest


def test_verify_passes(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _cli(["verify", DEMO_RUN_ID, "--store", str(store)], capsys)
    assert code == 0, out


@pytest.mark.docker
def test_replay_reproduces_the_duplicate_order(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _cli(["replay", DEMO_RUN_ID, "--store", str(store), "--times", "2"], capsys)
    assert code == 1, out  # 1: the failure reproduced
    assert "2/2" in out, out
