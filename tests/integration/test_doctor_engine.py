"""``sandbox doctor`` against the real engine, with each prerequisite missing in turn: only
that check fails, with its line, and the exit code is 1; with nothing missing it is 0."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import main
from sandbox.containers import connect
from sandbox.containers.images import DEFAULT_BASE
from sandbox.doctor import Diagnosis, diagnose
from sandbox.snapshot import DirectoryStore, Snapshot

pytestmark = pytest.mark.docker

DEMO_RUN = "demo-orders-duplicate"


def _copy_demo_store(committed: Path, dest: Path) -> DirectoryStore:
    """The demo run and the blobs the repository ships (never what a capture into the
    working tree's snapshots/ added)."""
    shutil.copytree(committed / "runs" / DEMO_RUN, dest / "runs" / DEMO_RUN)
    shutil.copytree(committed / "blobs", dest / "blobs")
    return DirectoryStore(dest)


@pytest.fixture
def demo_store(tmp_path: Path, committed_snapshots: Path) -> DirectoryStore:
    return _copy_demo_store(committed_snapshots, tmp_path / "store")


def _failing(diagnosis: Diagnosis) -> list[str]:
    return [c.name for c in diagnosis.checks if c.status == "fail"]


def _temporary_tag() -> str:
    return f"sandbox-replayer-test/doctor:{uuid.uuid4().hex[:12]}"


def test_everything_present_exits_0(demo_store: DirectoryStore) -> None:
    diagnosis = diagnose(demo_store)
    assert _failing(diagnosis) == []
    assert diagnosis.exit_code == 0
    by_name = {c.name: c for c in diagnosis.checks}
    assert by_name["engine"].status == "ok"
    assert by_name["engine"].detail.startswith("Docker ")
    for name in ("postgres", "redis"):
        assert by_name[f"libfaketime {name}"].status == "ok"
    assert by_name["memory"].status == "ok"
    assert f"the largest run, {DEMO_RUN}, needs " in by_name["memory"].detail


def test_docker_host_pointing_nowhere(
    demo_store: DirectoryStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent-sandbox-test/docker.sock")
    code = main(["doctor", "--store", str(demo_store.root)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert [line.split()[1] for line in lines if line.startswith("fail")] == ["engine"]
    assert lines[0].startswith(
        "fail  engine                     no Docker engine answers at "
        "unix:///nonexistent-sandbox-test/docker.sock; fix: `make engine`"
    )


def test_image_removed(demo_store: DirectoryStore) -> None:
    """The postgres image looked for under a tag that no image has (the shared image stays)."""
    absent = _temporary_tag()
    diagnosis = diagnose(demo_store, image_tags={"postgres": absent})
    assert _failing(diagnosis) == ["image postgres"]
    assert diagnosis.exit_code == 1
    line = next(c.line() for c in diagnosis.checks if c.name == "image postgres")
    assert line == (f"fail  image postgres             {absent} is not built; fix: `make images`")


@pytest.fixture
def image_without_faketime() -> Iterator[str]:
    """A temporary tag on the Debian base image, which has no libfaketime; untagged after."""
    client = connect()
    tag = _temporary_tag()
    repo, _, name = tag.partition(":")
    client.images.get(DEFAULT_BASE).tag(repo, name)
    try:
        yield tag
    finally:
        client.images.remove(tag)  # removes the tag only: the base keeps its own


def test_image_without_libfaketime(demo_store: DirectoryStore, image_without_faketime: str) -> None:
    diagnosis = diagnose(demo_store, image_tags={"redis": image_without_faketime})
    assert _failing(diagnosis) == ["libfaketime redis"]
    assert diagnosis.exit_code == 1
    check = next(c for c in diagnosis.checks if c.name == "libfaketime redis")
    assert check.detail == (
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 is missing from "
        f"{image_without_faketime}: its clock cannot be frozen"
    )


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A real 8 MB tmpfs: too small for the 64 MB a replay needs besides the state."""
    mount = tmp_path / "volume"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_store_on_a_too_small_volume(
    small_volume: Path, committed_snapshots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _copy_demo_store(committed_snapshots, small_volume / "store")
    code = main(["doctor", "--store", str(store.root)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    failing = [line for line in lines if line.startswith("fail")]
    assert len(failing) == 1
    assert failing[0].startswith("fail  space                      ")
    assert (
        f"free at {store.root}, 64.0 MB needed: 64.0 MB for a replay's events and reports "
        f"plus the largest captured state, 3.3 KB ({DEMO_RUN}, service db)" in failing[0]
    )


def test_state_larger_than_the_host_memory(demo_store: DirectoryStore) -> None:
    """A run captured from a 1 TiB database: its containers (sized to the state) cannot fit."""
    original = demo_store.load(DEMO_RUN)
    services = [
        state.model_copy(update={"meta": {**state.meta, "state_bytes": 1 << 40}})
        for state in original.manifest.services
    ]
    manifest = original.manifest.model_copy(update={"run_id": "huge-state", "services": services})
    demo_store.save(Snapshot(manifest, original.events))
    diagnosis = diagnose(demo_store)
    assert _failing(diagnosis) == ["memory"]
    assert diagnosis.exit_code == 1
    check = next(c for c in diagnosis.checks if c.name == "memory")
    assert check.detail.startswith("huge-state: the sandbox needs ")
    assert "of state) but the Docker host has " in check.detail
    assert check.fix.startswith("free memory, or replay on a machine with at least ")
