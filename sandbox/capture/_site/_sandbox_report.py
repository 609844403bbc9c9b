"""A captured program's child reports the services it opens to the program's capture, which
finds and captures them into the same run (:mod:`sandbox.capture.children`).

Standard library only: it also runs in a child whose interpreter is not the capture's (an MCP
server installed in a venv of its own, as ``uvx`` runs them), where the sandbox package and
its dependencies cannot be imported. There it watches ``sqlite3`` (the one client that needs
nothing installed); a child on the capture's interpreter routes every client through
:func:`report` (see :func:`sandbox.capture.hook.start_from_env`).

The exchange is one JSON line each way over the Unix socket named by the capture: the
connection (``kind``, ``client``, ``endpoint``, ``given``) and the endpoint to connect to.
The child waits for the answer, so the service's state is captured before the child's
first statement; if the capture does not answer, the child connects where it meant to
(capture fails open).
"""

from __future__ import annotations

import json
import runpy
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT = 120.0
"""Seconds the child waits for the capture to take the service's state."""


def report(path: str, kind: str, client: str, endpoint: str, given: str | None) -> str:
    """Tell the capture listening at ``path`` that this process connects to ``endpoint``;
    return the endpoint to connect to (``endpoint`` when the capture does not answer)."""
    line = json.dumps({"kind": kind, "client": client, "endpoint": endpoint, "given": given})
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(TIMEOUT)
            conn.connect(path)
            conn.sendall(line.encode() + b"\n")
            answer = conn.makefile("rb").readline()
        found = json.loads(answer).get("endpoint")
    except (OSError, ValueError, AttributeError):
        return endpoint
    return found if isinstance(found, str) else endpoint


def _sqlite_path() -> Callable[[Any, bool], str | None]:
    """The sqlite kind's :func:`sandbox.services.sqlite.filepath.sqlite_path`, loaded by its
    file (standard library only): this module runs where the package cannot be imported."""
    file = Path(__file__).resolve().parents[2] / "services" / "sqlite" / "filepath.py"
    found: Callable[[Any, bool], str | None] = runpy.run_path(str(file))["sqlite_path"]
    return found


def watch_sqlite3(path: str) -> None:
    """Report every file database this process opens with ``sqlite3`` (see the module)."""
    import sqlite3
    import sqlite3.dbapi2

    original = sqlite3.connect
    sqlite_path = _sqlite_path()

    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        file = sqlite_path(database, bool(kwargs.get("uri")))
        if file is not None:
            target = report(path, "sqlite", "sqlite3", file, str(database))
            if target != file:
                database = target
                kwargs.pop("uri", None)
        return original(database, *args, **kwargs)

    for owner in (sqlite3, sqlite3.dbapi2):
        owner.connect = connect  # type: ignore[attr-defined]
