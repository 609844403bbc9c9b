"""The temporary folders of a session's file services (``files``, ``sqlite``): made with the
session's owner written inside, so that :func:`gc_workdirs` can remove the ones a killed
replay left behind, as :func:`sandbox.containers.gc.gc` removes its containers."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
from pathlib import Path

from sandbox.containers.labels import Owner, owner_alive

PREFIX = "sbx-"
OWNER_FILE = ".sandbox-owner.json"


def make_workdir(owner: Owner, root: str | None = None) -> Path:
    """A new temporary folder for ``owner``'s session, marked with its owner."""
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{owner.session}-", dir=root))
    (folder / OWNER_FILE).write_text(json.dumps(owner.labels()), encoding="utf-8")
    return folder


def gc_workdirs(all: bool = False, root: str | None = None) -> list[str]:
    """Remove the session folders whose owner is gone (every one with ``all``); return their
    paths. A folder without a readable owner file is not ours and is left alone."""
    host = socket.gethostname()
    removed = []
    for folder in sorted(Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        marker = folder / OWNER_FILE
        try:
            labels = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(labels, dict):
            continue
        if all or not owner_alive({str(k): str(v) for k, v in labels.items()}, host):
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)
                removed.append(str(folder))
    return removed
