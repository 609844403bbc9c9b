"""A damaged or unreadable run never stops the store's other commands; leftovers of killed
writers are cleaned; a write the disk refuses is one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from snapshot_factory import build_snapshot

from cli.main import main
from sandbox.regress.check import expected_reproductions
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.bundle import export_bundle


def damage(store: DirectoryStore) -> None:
    """``cut-1``: a manifest truncated in the middle; ``loop-1``: a manifest that cannot be
    opened at all (a symbolic link to itself), whoever runs the command."""
    build_snapshot(store, "cut-1")
    manifest = store.run_dir("cut-1") / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:40])
    build_snapshot(store, "loop-1")
    manifest = store.run_dir("loop-1") / "manifest.json"
    manifest.unlink()
    manifest.symlink_to(manifest)


def test_list_shows_damaged_and_unreadable_runs_with_their_reason(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store, "good-1")
    damage(store)
    assert main(["list", "--json", "--store", str(store.root)]) == 0
    listed = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed["good-1"]["status"] == "complete"
    assert listed["cut-1"]["status"] == "damaged"
    assert "not valid JSON" in listed["cut-1"]["failure"]
    assert listed["loop-1"]["status"] == "damaged"
    assert "unreadable (Too many levels of symbolic links)" in listed["loop-1"]["failure"]
    assert main(["list", "--store", str(store.root)]) == 0
    table = capsys.readouterr().out
    assert "damaged" in table and "good-1" in table


def test_other_runs_still_verify_export_and_count_for_ci(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store, "good-1")
    damage(store)
    assert main(["verify", "good-1", "--store", str(store.root)]) == 0
    assert export_bundle(store, "good-1", tmp_path / "good.tar.gz").is_file()
    assert [m.run_id for m in expected_reproductions(store)] == ["good-1"]
    assert main(["verify", "loop-1", "--store", str(store.root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "loop-1" in err


def test_stale_staging_is_cleaned_and_fresh_staging_kept(store: DirectoryStore) -> None:
    build_snapshot(store, "good-1")
    staging = store.staging_dir()
    old, fresh = staging / "run-killed", staging / "run-busy"
    for folder in (old, fresh):
        folder.mkdir()
        (folder / "events.jsonl").write_bytes(b"{}\n")
    half = staging / ".tmp-half-written"
    half.write_bytes(b"x")
    day_ago = time.time() - 24 * 3600
    for path in (old / "events.jsonl", old, half):
        os.utime(path, (day_ago, day_ago))
    assert main(["list", "--store", str(store.root)]) == 0
    assert not old.exists() and not half.exists()
    assert fresh.is_dir()


def test_a_full_disk_during_import_is_one_clear_line(store: DirectoryStore, tmp_path: Path) -> None:
    build_snapshot(store, "good-1")
    bundle = export_bundle(store, "good-1", tmp_path / "good.tar.gz")
    target = tmp_path / "target"
    # The child may write files of at most 200 bytes: its writes fail as on a full disk.
    child = (
        "import resource, signal, sys\n"
        "from cli.main import main\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, "import", str(bundle), "--store", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "the file size limit is reached" in lines[0], done.stderr
    assert not (target / "runs").exists()
