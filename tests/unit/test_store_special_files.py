"""A store file that is a symbolic link, a device or a fifo is never followed or read:
``verify`` answers at once with one line naming it (a blob linked to ``/dev/zero`` used to
make it read forever), and reads and writes through the store refuse it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from snapshot_factory import build_snapshot

from sandbox.errors import NotRegularFileError
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.store import EVENTS, MANIFEST


def _verify(store: DirectoryStore, run: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "verify", run, "--store", str(store.root)],
        capture_output=True,
        text=True,
        timeout=60,  # reading /dev/zero would never end
        check=False,
    )


def _first_blob(store: DirectoryStore) -> Path:
    key = store.load_manifest("run-1").services[0].before
    assert key is not None
    return store.blob_path(key.sha256)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_blob_linked_to_a_device_is_refused_at_once_in_one_line(
    store: DirectoryStore, target: str
) -> None:
    build_snapshot(store)
    blob = _first_blob(store)
    blob.unlink()
    blob.symlink_to(target)
    done = _verify(store, "run-1")
    assert done.returncode == 1, done.stderr
    problems = [line for line in done.stdout.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1, done.stdout
    assert blob.name in problems[0] and "symbolic link" in problems[0]
    assert "1 problem(s)" in done.stdout


def test_a_fifo_in_place_of_the_event_log_is_not_opened_for_reading(
    store: DirectoryStore,
) -> None:
    build_snapshot(store)
    events = store.run_dir("run-1") / EVENTS
    events.unlink()
    os.mkfifo(events)  # opening it to read would wait for a writer forever
    done = _verify(store, "run-1")
    assert done.returncode == 1, done.stderr
    assert f"runs/run-1/{EVENTS}: is a fifo, not a regular file" in done.stdout


def test_reads_and_appends_refuse_links_and_devices(store: DirectoryStore, tmp_path: Path) -> None:
    build_snapshot(store)
    blob = _first_blob(store)
    blob.unlink()
    blob.symlink_to("/dev/zero")
    with pytest.raises(NotRegularFileError, match="symbolic link"):
        store.get_blob(blob.name)
    assert not store.has_blob(blob.name)
    manifest = store.run_dir("run-1") / MANIFEST
    manifest.rename(tmp_path / "elsewhere.json")
    manifest.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(NotRegularFileError, match="symbolic link"):
        store.read_manifest_bytes("run-1")
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    events = store.run_dir("run-1") / EVENTS
    events.unlink()
    events.symlink_to(outside)
    (store.run_dir("run-1") / MANIFEST).unlink()
    (tmp_path / "elsewhere.json").rename(store.run_dir("run-1") / MANIFEST)
    with pytest.raises(NotRegularFileError, match="symbolic link"):
        store.resume("run-1")
    assert outside.read_bytes() == b""  # nothing written through the link


def test_a_blob_put_again_replaces_a_link_in_its_place(store: DirectoryStore) -> None:
    build_snapshot(store)
    blob = _first_blob(store)
    data = blob.read_bytes()
    blob.unlink()
    blob.symlink_to("/dev/null")
    store.put_blob(data)
    assert not blob.is_symlink() and blob.read_bytes() == data
