"""Touched-state capture of a workspace, real files: which opens of a run count as reads (and
so keep the file as it was before), and that they are the run's own."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sandbox.seam import boundary
from sandbox.services.files import KIND


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    for name in ("read.txt", "append.txt", "written.txt", "low.txt", "d/deep.txt", "x.pyc"):
        (root / name).write_text(f"was {name}")
    return root


class _Run:
    """A stand-in for a run's boundary: an object the pin is attributed to."""


def test_reads_appends_and_low_level_opens_keep_the_file_as_it_was(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    run = _Run()
    leave = boundary.enter(run)  # type: ignore[arg-type]
    try:
        pinned = KIND.pin(str(root))
        pinned.bind()
        (root / "read.txt").read_text()
        with open(root / "append.txt", "a") as f:
            f.write(" and more")
        with open(root / "written.txt", "w") as f:  # truncated: what was there is not read
            f.write("new")
        os.close(os.open(root / "low.txt", os.O_RDONLY))
        (root / "d" / "deep.txt").read_bytes()
        (root / "x.pyc").read_bytes()  # ignored by the default patterns
        open(root / "absent.txt", "a").close()
        before, after = pinned.finish()
    finally:
        leave()
    assert before.meta["files_of"] == [
        "absent.txt",
        "append.txt",
        "d/deep.txt",
        "low.txt",
        "read.txt",
    ]
    described = KIND.describe_data(str(tmp_path), before.data)["files"]
    assert isinstance(described, dict)
    assert sorted(described) == ["append.txt", "d", "d/deep.txt", "low.txt", "read.txt"]
    ended = KIND.describe_data(str(tmp_path), after.data)["files"]
    assert isinstance(ended, dict)
    assert sorted(ended) == ["absent.txt", "append.txt", "d", "d/deep.txt", "low.txt", "read.txt"]
    assert ended["append.txt"] != described["append.txt"], "the end state: as the run left it"


def test_a_read_in_another_context_is_not_the_runs(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    run = _Run()
    leave = boundary.enter(run)  # type: ignore[arg-type]
    try:
        pinned = KIND.pin(str(root))
        pinned.bind()
        other = threading.Thread(target=lambda: (root / "low.txt").read_text())
        import contextvars

        contextvars.Context().run(other.start)  # a thread of no run
        other.join()
        (root / "read.txt").read_text()
        before, _after = pinned.finish()
    finally:
        leave()
    assert before.meta["files_of"] == ["read.txt"]
