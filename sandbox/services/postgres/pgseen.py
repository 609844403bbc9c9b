"""The statements each captured run sends to a Postgres database, seen at the client.

A run pinned for a touched capture (:class:`~sandbox.services.postgres.PinnedPostgres`)
registers a :class:`Seen` for its database, keyed by the run (its boundary, the object
serving its context) and the database's address. The psycopg and asyncpg hooks
(:mod:`sandbox.services.postgres.clients`) hand over each statement a cursor executes
(``execute``, ``executemany``, ``copy``, ``stream``, sync and async, server-side cursors
too), or an asyncpg connection sends (``execute``, every prepared statement: ``fetch``,
``fetchrow``, ``executemany``, cursors; ``COPY``), before it is sent; it is kept, once per
distinct text, by the run in whose context it is sent, so runs sharing one connection or
pool each keep their own. Nothing else happens on
the agent's path: the statements are read only when the run is kept
(:mod:`sandbox.services.postgres.pgreach` says which tables they reach).

psycopg2's are seen at its watched cursors (:mod:`.psycopg2_cursors`). A connection whose
statements are not all seen (a psycopg2 connection opened before the hooks were installed,
whose cursors of a class a call names are not watched) is noted instead: the statements
then cannot tell the touched tables, and the capture falls back to the server's statistics
counters (:mod:`sandbox.services.postgres.pgtouched`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sandbox.seam import boundary

MAX_STATEMENTS = 5000
"""Distinct statements a run keeps; past it, the statements cannot tell its tables."""


def address(host: object, port: object, dbname: object) -> str:
    """``host:port/dbname`` of a database, loopback names folded (the key of the runs')."""
    name = str(host or "localhost").lower()
    if name in ("localhost", "::1", "[::1]"):
        name = "127.0.0.1"
    try:
        number = int(str(port or 5432).split(",")[0])
    except ValueError:
        number = 5432
    return f"{name.split(',')[0]}:{number}/{dbname or ''}"


class Seen:
    """The distinct statements one run sent to one database (see the module
    documentation)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.texts: set[str] = set()
        self.composed: list[Any] = []
        """Statements given as ``psycopg.sql`` objects (made text when read)."""
        self.unseen: set[str] = set()
        """Clients the run connected through whose statements are not seen."""
        self.overflow = False
        self._owner: int | None = None

    def add(self, query: Any) -> None:
        if isinstance(query, str):
            if query in self.texts:
                return
            texts = self.texts
        elif isinstance(query, bytes | bytearray | memoryview):
            self.add(bytes(query).decode("utf-8", "replace"))
            return
        else:
            texts = None
        if len(self.texts) + len(self.composed) >= MAX_STATEMENTS:
            self.overflow = True
            return
        if texts is not None:
            texts.add(query)
        else:
            self.composed.append(query)

    def statements(self) -> list[str] | None:
        """Every distinct statement as text, or ``None`` when one cannot be told."""
        out = set(self.texts)
        for query in self.composed:
            try:
                out.add(str(query.as_string(None)))
            except Exception:
                return None
        return sorted(out)

    def bind(self, owner: object | None) -> None:
        """Keep the statements of the run ``owner`` from now on (``None``: of no run)."""
        with _lock:
            if self._owner is not None:
                _drop(self._owner, self)
            self._owner = None if owner is None else id(owner)
            if self._owner is not None:
                _runs.setdefault(self._owner, []).append(self)

    def unbind(self) -> None:
        self.bind(None)


_lock = threading.Lock()
_runs: dict[int, list[Seen]] = {}
"""``id`` of a run's boundary -> the databases whose statements it keeps."""


def _drop(owner: int, seen: Seen) -> None:
    found = _runs.get(owner)
    if found is None:
        return
    found[:] = [s for s in found if s is not seen]
    if not found:
        del _runs[owner]


def _mine() -> list[Seen] | None:
    if not _runs:  # no run keeps statements: the agent's path costs one check
        return None
    return _runs.get(id(boundary.current()))


def keeping() -> bool:
    """Whether the run in context keeps statements (one check when none does)."""
    return bool(_mine())


def saw(conn: Any, query: Any) -> None:
    """A psycopg connection's cursor is about to send ``query`` (a hook's call)."""
    saw_at(lambda: (conn.info.host, conn.info.port, conn.info.dbname), query)


def saw_at(where: Callable[[], tuple[object, object, object]], query: Any) -> None:
    """A connection at ``where()`` (its host, port and dbname; read only when a run keeps
    statements) is about to send ``query`` (a hook's call)."""
    mine = _mine()
    if not mine:
        return
    try:
        at = address(*where())
    except Exception:  # a closed connection: its statement fails anyway
        return
    for seen in mine:
        if seen.where == at:
            seen.add(query)


def connected(client: str, host: object, port: object, dbname: object) -> None:
    """The run in context connects through ``client``, whose statements are not seen."""
    mine = _mine()
    if not mine:
        return
    where = address(host, port, dbname)
    for seen in mine:
        if seen.where == where:
            seen.unseen.add(client)
