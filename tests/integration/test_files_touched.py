"""A files workspace in production (``keep="failed"``, touched state), real files: a kept
run holds exactly the files it opened for reading, by content at first read, not the
folder; its replay restores those and reproduces; a replay that reads a file that was not
kept is inconclusive, naming its path."""

from __future__ import annotations

import importlib
import io
import sys
import tarfile
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from cli.main import main
from sandbox import capture
from sandbox.services.files import kept_paths
from sandbox.services.files.touched import COUNT_META, FILES_META, STATE_META
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker  # the replay brings its sandbox up

AGENT = """
import os
from sandbox import capture

EXTRA: list[str] = []
SKIP: list[bool] = []
SPEC = [capture.ServiceSpec("ws", "files", {workspace!r}, env="WORKSPACE")]


@capture.run("notes", store={store!r}, keep="failed", services=SPEC)
def notes():
    root = os.environ["WORKSPACE"]
    if SKIP:  # the state read elsewhere (another process, unseen): assumed
        price, coupon = 100, b"SAVE10"
    else:
        with open(os.path.join(root, "price.txt")) as f:
            price = int(f.read())
        coupon = open(os.path.join(root, "sub", "coupon.txt"), "rb").read()
    for rel in EXTRA:
        open(os.path.join(root, rel)).read()
    total = price - 10 if coupon else price
    total = total - 10 if coupon else total  # the bug: the coupon applies twice
    with open(os.path.join(root, "out.txt"), "w") as f:
        f.write(str(total))
    if price == 100 and total != price - 10:  # only against the state as it was
        raise AssertionError(f"coupon applied twice: {{total}}")


@capture.run("fine", store={store!r}, keep="failed", services=SPEC)
def fine():
    open(os.path.join(os.environ["WORKSPACE"], "price.txt")).read()
"""


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "price.txt").write_text("100")
    (root / "sub" / "coupon.txt").write_bytes(b"SAVE10")
    for i in range(200):
        (root / f"filler-{i}.txt").write_text("x" * 50)
    monkeypatch.setenv("WORKSPACE", str(root))
    return root


def _agent(tmp_path: Path, workspace: Path, store: Path, mp: pytest.MonkeyPatch) -> ModuleType:
    text = AGENT.format(store=str(store), workspace=str(workspace))
    (tmp_path / "notesagent.py").write_text(textwrap.dedent(text))
    mp.chdir(tmp_path)
    mp.syspath_prepend(str(tmp_path))
    sys.modules.pop("notesagent", None)
    return importlib.import_module("notesagent")


def _members(data: bytes) -> dict[str, bytes | None]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {
            m.name: (f.read() if (f := tar.extractfile(m)) is not None else None)
            for m in tar.getmembers()
        }


def test_a_run_reading_2_of_202_files_keeps_those_and_its_replay_reproduces(
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, workspace, store.root, monkeypatch)
    with pytest.raises(AssertionError):
        agent.notes()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    (service,) = manifest.services
    assert service.meta[STATE_META] == "touched"
    assert service.meta[COUNT_META] == 2
    assert service.meta[FILES_META] == ["price.txt", "sub/coupon.txt"]
    assert service.before is not None and service.after is not None
    before = store.get_blob(service.before.sha256)
    assert _members(before) == {"price.txt": b"100", "sub": None, "sub/coupon.txt": b"SAVE10"}
    assert kept_paths(before) == ["price.txt", "sub/coupon.txt"]

    (workspace / "price.txt").write_text("999")  # the live folder moved on since
    capsys.readouterr()
    code = main(["replay", manifest.run_id, "--times", "2", "--store", str(store.root)])
    seen = capsys.readouterr()
    assert code == 1, seen.out + seen.err
    assert "failure reproduced: 2/2 runs" in seen.out


def test_a_replay_reading_a_file_that_was_not_kept_is_inconclusive_naming_it(
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, workspace, store.root, monkeypatch)
    with pytest.raises(AssertionError):
        agent.notes()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    agent.EXTRA.append("filler-7.txt")
    monkeypatch.setenv("COLUMNS", "300")
    capsys.readouterr()
    code = main(["replay", manifest.run_id, "--store", str(store.root)])
    seen = capsys.readouterr()
    out = seen.out + seen.err
    assert code == 2, out
    assert "read file 'filler-7.txt', which the capture did not keep" in out


def test_a_run_that_ends_well_keeps_no_file(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, workspace, store.root, monkeypatch)
    agent.fine()
    capture.flush()  # the kept runs are written in the background
    assert store.list() == []
    assert list(store.iter_blobs()) == []
    from sandbox.services.files import touched

    assert touched._pins == {}


def test_a_replay_whose_reads_were_not_seen_is_inconclusive(
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A replayed run that opens none of the kept files in the replaying process (its reads
    happen where they cannot be watched) is never judged on them."""
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, workspace, store.root, monkeypatch)
    with pytest.raises(AssertionError):
        agent.notes()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    agent.SKIP.append(True)
    monkeypatch.setenv("COLUMNS", "300")
    capsys.readouterr()
    code = main(["replay", manifest.run_id, "--store", str(store.root)])
    seen = capsys.readouterr()
    out = seen.out + seen.err
    assert code == 2, out
    assert "opened none of the 2 file(s) the capture kept in this process" in out
