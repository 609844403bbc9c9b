"""Where a run happens: code version, runtime, host, environment (redacted)."""

from __future__ import annotations

import functools
import importlib.metadata
import math
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sandbox.snapshot.events import BlobRef
from sandbox.snapshot.manifest import CodeVersion, Runtime


def _git(cwd: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def code_version(
    cwd: str | os.PathLike[str], put_blob: Callable[[bytes, str], BlobRef], *, once: bool = False
) -> CodeVersion:
    """The git commit of ``cwd`` and, when the tree is dirty, the diff against it as a blob.
    Outside a git checkout: an empty :class:`CodeVersion`. ``once``: read once per process
    and folder (what a capture does: the code a process runs is the code it started with)."""
    if once:
        commit, dirty, diff = _git_state_once(_realpath_once(os.fspath(cwd)))
    else:
        commit, dirty, diff = _git_state(os.path.realpath(cwd))
    if not commit:
        return CodeVersion()
    ref = put_blob(diff, "text/x-diff") if diff.strip() else None
    return CodeVersion(commit=commit, dirty=dirty, diff=ref)


_realpath_once = functools.lru_cache(maxsize=64)(os.path.realpath)


def _git_state(cwd: str) -> tuple[str, bool, bytes]:
    """``(commit, dirty, diff)`` of the checkout at ``cwd`` (``""`` outside one). One ``git
    status`` gives the commit and whether anything changed; ``git diff`` runs only when a
    tracked file did."""
    where = Path(cwd)
    status = _git(
        where,
        "--no-optional-locks",
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=normal",
    )
    if status is None:
        return "", False, b""
    commit = ""
    tracked = untracked = False
    for line in status.decode(errors="replace").splitlines():
        if line.startswith("# branch.oid "):
            commit = line.split()[2]
        elif line.startswith("?"):
            untracked = True
        elif line[:1] in ("1", "2", "u"):
            tracked = True
    if not commit or commit == "(initial)":
        return "", False, b""
    diff = (_git(where, "diff", "HEAD", "--binary") or b"") if tracked else b""
    return commit, bool(diff.strip()) or untracked, diff


_git_state_once = functools.cache(_git_state)


PATHS_CHECKED_EVERY = 1.0
"""Seconds during which the import paths' modification times, once read, are taken as
unchanged (a change of ``sys.path`` itself is seen at once)."""
_paths_seen: tuple[tuple[str, ...], float, tuple[tuple[str, int], ...]] = ((), -math.inf, ())


def _path_key() -> tuple[tuple[str, int], ...]:
    """Each import path with its modification time: installing or removing a distribution
    changes the folder it lives in (the times are read again at most once a second)."""
    global _paths_seen
    paths = tuple(sys.path)
    now = time.monotonic()
    seen_paths, seen_at, seen_key = _paths_seen
    if paths == seen_paths and now - seen_at < PATHS_CHECKED_EVERY:
        return seen_key
    key = []
    for entry in paths:
        try:
            key.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            key.append((entry, -1))
    _paths_seen = (paths, now, tuple(key))
    return _paths_seen[2]


@functools.lru_cache(maxsize=4)
def _packages(key: tuple[tuple[str, int], ...]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        named = _from_folder(dist)
        if named is None:
            name = dist.name
            named = (str(name), str(dist.version)) if name else None
        if named is not None:
            found.setdefault(_canonical(named[0]), named[1])
    return tuple(sorted(found.items()))


def _canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``PyYAML`` -> ``pyyaml``,
    ``typing_extensions`` -> ``typing-extensions``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _from_folder(dist: importlib.metadata.Distribution) -> tuple[str, str] | None:
    """``(name, version)`` from a ``NAME-VERSION.dist-info`` folder's name (the wheel
    format escapes ``-`` in both): reading each distribution's metadata file costs a
    parse of its whole text."""
    folder = getattr(dist, "_path", None)
    base = str(getattr(folder, "name", ""))
    stem = base.removesuffix(".dist-info")
    if stem == base or stem.count("-") != 1:
        return None
    name, version = stem.split("-")
    return (name, version) if name and version else None


def runtime(packages: bool = True) -> Runtime:
    """Python version, platform, and the installed distributions (PEP 503 names) with their
    versions (read once per process while the import paths do not change: the same object
    is handed out meanwhile)."""
    return _runtime(_packages(_path_key()) if packages else ())


@functools.lru_cache(maxsize=4)
def _runtime(packages: tuple[tuple[str, str], ...]) -> Runtime:
    return Runtime(
        python=sys.version.split()[0], platform=platform.platform(), packages=dict(packages)
    )


def host() -> str:
    return socket.gethostname()
