"""A store on a read-only file system, or on a full one, costs every command that writes
one line and exit 2 (``capture``: 125, its own failure, as ``docker run`` says it; it used to
be an internal error, exit 3, for ``capture``, ``replay`` and ``import``). The store is a
tmpfs mounted read-only: ``chmod`` does not stop root."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from snapshot_factory import CREATED, build_snapshot

from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.bundle import export_bundle
from sandbox.snapshot.events import StateTransition
from sandbox.snapshot.store import dump_event


def _mount(point: Path, *options: str) -> None:
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(point)],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "mnt"
    point.mkdir()
    try:
        _mount(point, "size=8m")
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {exc}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True)


def _sandbox(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={"PYTHONPATH": str(Path(__file__).parents[2]), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str], reason: str, code: int = 2) -> None:
    lines = [line for line in done.stderr.splitlines() if line.startswith("sandbox: ")]
    assert done.returncode == code, done.stderr
    assert "internal error" not in done.stderr, done.stderr
    assert len(lines) == 1 and reason in lines[0], done.stderr


def test_every_writing_command_on_a_read_only_store_is_one_line_and_exit_2(
    mounted: Path, tmp_path: Path
) -> None:
    store = DirectoryStore(mounted / "store")
    build_snapshot(store)
    code = "import sys; sys.exit(1)"
    done = _sandbox(
        "capture", "--name", "bad", "--fail-if", "exit!=0", "--store", str(store.root),
        "--", sys.executable, "-c", code, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (captured,) = [r for r in store.run_ids() if r.startswith("bad")]
    source = DirectoryStore(tmp_path / "source")
    build_snapshot(source, "run-2")
    bundle = export_bundle(source, "run-2", tmp_path / "run-2.tar.gz")
    subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)

    read_only = "read-only file system"
    at = ["--store", str(store.root)]
    again = ["capture", "--name", "again", *at, "--", sys.executable, "-c", code]
    _one_line(_sandbox(*again, cwd=tmp_path), read_only, code=125)
    _one_line(_sandbox("replay", captured, *at, cwd=tmp_path), read_only)
    _one_line(_sandbox("import", str(bundle), *at, cwd=tmp_path), read_only)
    # reading still works
    assert _sandbox("verify", "run-1", *at, cwd=tmp_path).returncode == 0


def test_a_full_store_is_one_line_and_exit_2(mounted: Path, tmp_path: Path) -> None:
    source = DirectoryStore(tmp_path / "source")
    lines = b"".join(
        dump_event(StateTransition(seq=i, wall=0, mono=0, source="a", target="b" * 200))
        for i in range(20_000)
    )  # about 4 MiB of event log
    source.save_raw(Manifest(run_id="run-1", created=CREATED, status="complete"), lines)
    bundle = export_bundle(source, "run-1", tmp_path / "run-1.tar.gz")
    store = DirectoryStore(mounted / "store")
    store.put_blob(b"y" * (6 << 20))  # leaves less room than the run's files need
    done = _sandbox("import", str(bundle), "--store", str(store.root), cwd=tmp_path)
    _one_line(done, "the disk is full")
    assert not store.exists("run-1")
