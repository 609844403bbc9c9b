"""The syncer that makes finished runs durable off the agent's path."""

from __future__ import annotations

from pathlib import Path

from sandbox.capture import durable


def test_files_and_folders_are_synced_and_gone_paths_passed_over(tmp_path: Path) -> None:
    """A batch holding files, their folder and a path removed since (a run deleted) is
    synced without an error."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_bytes(b"{}\n")
    (run / "events.jsonl").write_bytes(b"")
    durable.sync_paths([run / "manifest.json", run / "events.jsonl", run, tmp_path / "gone"])


def test_flush_syncs_what_was_handed_over_without_waiting_for_the_batch(tmp_path: Path) -> None:
    """``flush`` returns once every path handed over is synced (a benchmark counts the sync
    inside its timed region this way); nothing is left pending."""
    paths = []
    for i in range(3):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"x" * i)
        paths.append(path)
    durable.sync_later([*paths, tmp_path, tmp_path / "gone"])
    assert durable.flush(timeout=30)
    assert durable.wait(timeout=0)
