"""Where a run happens: code version, runtime, host, environment (redacted)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
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
    cwd: str | os.PathLike[str], put_blob: Callable[[bytes, str], BlobRef]
) -> CodeVersion:
    """The git commit of ``cwd`` and, when the tree is dirty, the diff against it as a blob.
    Outside a git checkout: an empty :class:`CodeVersion`."""
    where = Path(cwd)
    commit = _git(where, "rev-parse", "HEAD")
    if commit is None:
        return CodeVersion()
    diff = _git(where, "diff", "HEAD", "--binary") or b""
    untracked = _git(where, "ls-files", "--others", "--exclude-standard") or b""
    dirty = bool(diff.strip() or untracked.strip())
    ref = None
    if diff.strip():
        ref = put_blob(diff, "text/x-diff")
    return CodeVersion(commit=commit.decode().strip(), dirty=dirty, diff=ref)


def runtime(packages: bool = True) -> Runtime:
    """Python version, platform, and the installed distributions with their versions."""
    found: dict[str, str] = {}
    if packages:
        for dist in importlib.metadata.distributions():
            name = dist.name
            if name:
                found[str(name)] = str(dist.version)
    return Runtime(
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages=dict(sorted(found.items())),
    )


def host() -> str:
    return socket.gethostname()
