"""Store edges every command shares: ``gc`` takes ``--store`` like the others, a run folder
that is a plain file is listed as damaged (not left out), and ``verify`` of a run whose
capture did not finish says so and exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from snapshot_factory import CREATED, build_snapshot

from cli.main import main
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.events import ClockRead
from sandbox.snapshot.store import dump_event


def test_gc_takes_store_and_cleans_what_killed_writers_left(store: DirectoryStore) -> None:
    leftover = store.staging_dir() / "run-abandoned"
    leftover.mkdir()
    old = time.time() - 7 * 24 * 3600
    os.utime(leftover, (old, old))
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "gc", "--store", str(store.root)],
        capture_output=True,
        text=True,
        timeout=120,
        # No engine here: the store is cleaned first, then the engine's absence is one line.
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
        check=False,
    )
    assert "No such option" not in done.stderr, done.stderr
    assert not leftover.exists()
    assert done.returncode == 2 and "no Docker engine answers" in done.stderr


def test_a_run_folder_that_is_a_plain_file_is_listed_as_damaged(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    store.runs_dir.joinpath("stray-file").write_text("not a run")
    assert main(["list", "--store", str(store.root), "--json"]) == 0
    listed = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed["run-1"]["status"] == "complete"
    assert listed["stray-file"]["status"] == "damaged"
    assert "runs/stray-file is a file, not a folder" in listed["stray-file"]["failure"]


def test_a_run_folder_that_is_a_link_is_not_followed(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = DirectoryStore(tmp_path / "elsewhere")
    build_snapshot(elsewhere)
    store.runs_dir.mkdir(parents=True)
    store.runs_dir.joinpath("run-1").symlink_to(elsewhere.run_dir("run-1"))
    assert main(["list", "--store", str(store.root), "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only["status"] == "damaged" and "symbolic link" in only["failure"]


def test_verify_of_an_incomplete_run_says_incomplete_and_exits_1(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    line = dump_event(ClockRead(seq=0, wall=0, mono=0, value=1.0))
    # A capture that died: status still "running", its process long gone.
    store.save_raw(Manifest(run_id="died", created=CREATED, pid=2**22 + 12345), line)
    assert main(["verify", "died", "--store", str(store.root)]) == 1
    out = capsys.readouterr().out
    assert "incomplete" in out and ": ok" not in out
    assert main(["verify", "died", "--store", str(store.root), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["state"] == "incomplete"
    build_snapshot(store)
    assert main(["verify", "run-1", "--store", str(store.root)]) == 0
