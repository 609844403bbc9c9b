"""The start-of-run collection: the code version from one ``git status`` (and a diff only
when a tracked file changed), the package list read once while the import paths stay."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.capture import environment
from sandbox.capture.environment import code_version, runtime
from sandbox.snapshot.events import BlobRef


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def _put(stored: list[bytes]) -> object:
    def put(data: bytes, media: str) -> BlobRef:
        stored.append(data)
        return BlobRef(sha256="0" * 64, size=len(data), media_type=media)

    return put


def test_code_version_clean_modified_untracked_and_outside_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(repo, "rev-parse", "HEAD").strip()
    stored: list[bytes] = []

    clean = code_version(repo, _put(stored))  # type: ignore[arg-type]
    assert (clean.commit, clean.dirty, clean.diff, stored) == (head, False, None, [])

    (repo / "new.txt").write_text("untracked")
    untracked = code_version(repo, _put(stored))  # type: ignore[arg-type]
    assert (untracked.commit, untracked.dirty, untracked.diff, stored) == (head, True, None, [])

    (repo / "a.py").write_text("x = 2\n")
    modified = code_version(repo, _put(stored))  # type: ignore[arg-type]
    assert modified.commit == head and modified.dirty and modified.diff is not None
    assert len(stored) == 1 and b"+x = 2" in stored[0]

    outside = tmp_path / "plain"
    outside.mkdir()
    assert code_version(outside, _put(stored)).commit is None  # type: ignore[arg-type]


def test_packages_are_read_once_until_an_import_path_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment._packages.cache_clear()
    first = runtime()
    assert "pydantic" in {name.lower() for name in first.packages}
    assert runtime().packages == first.packages
    assert environment._packages.cache_info().hits == 1
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    runtime()
    assert environment._packages.cache_info().misses == 2, "a new path is read again"
    assert runtime(packages=False).packages == {}


def test_packages_read_from_folder_names_match_their_metadata() -> None:
    """Names and versions taken from ``NAME-VERSION.dist-info`` folder names (no metadata
    parse) are those the metadata files hold, names in their PEP 503 form."""
    environment._packages.cache_clear()
    want: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        if dist.name:
            want.setdefault(re.sub(r"[-_.]+", "-", dist.name).lower(), dist.version)
    assert runtime().packages == want
    assert "pydantic-core" in want
