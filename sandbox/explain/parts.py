"""The parts of a restored service's state that a trial can remove: a table's rows
(Postgres, SQLite), a key (Redis), a file (a ``files`` workspace).

The parts are read from the restored service (its kind's ``describe``), so they are what the
captured state holds; a trial removes the released ones after each reset, on top of the
captured state, and the next reset brings them back. A service with more than
:data:`MAX_PARTS` parts is one part (``everything``): ddmin over a thousand keys would spend
the budget on them. A kind with no remover here has no parts (its state is always kept).
"""

from __future__ import annotations

import base64
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from sandbox.errors import ServiceError
from sandbox.services.registry import get_kind

MAX_PARTS = 12
EVERYTHING = "everything"


def _tables(description: dict[str, object]) -> list[str]:
    tables = description.get("tables")
    if not isinstance(tables, dict):
        return []
    return [f"table {name}" for name, rows in tables.items() if rows]


def _keys(description: dict[str, object]) -> list[str]:
    keys = description.get("keys")
    return [f"key {name}" for name in keys] if isinstance(keys, dict) else []


def _files(description: dict[str, object]) -> list[str]:
    files = description.get("files")
    if not isinstance(files, dict):
        return []
    return [
        f"file {name}"
        for name, entry in files.items()
        if not (isinstance(entry, dict) and entry.get("dir"))
    ]


def _postgres_remove(endpoint: str, names: Sequence[str]) -> None:
    import psycopg
    from psycopg import sql

    try:
        # one transaction; a row another table still references stops it (the trial is then
        # inconclusive, with the constraint named)
        with psycopg.connect(endpoint, connect_timeout=10) as conn, conn.transaction():
            for name in names:
                schema, _, table = name.rpartition(".")
                ident = sql.Identifier(schema or "public", table)
                conn.execute(sql.SQL("DELETE FROM {}").format(ident))
    except psycopg.Error as exc:
        raise ServiceError(f"cannot remove rows of {', '.join(names)}: {exc}") from None


def _sqlite_remove(endpoint: str, names: Sequence[str]) -> None:
    from sandbox.services.sqlite import db_path

    try:
        with contextlib.closing(sqlite3.connect(db_path(endpoint))) as conn, conn:
            for name in names:
                conn.execute('DELETE FROM "' + name.replace('"', '""') + '"')
    except sqlite3.Error as exc:
        raise ServiceError(f"cannot remove rows of {', '.join(names)}: {exc}") from None


def _redis_remove(endpoint: str, names: Sequence[str]) -> None:
    import redis

    keys = [
        base64.b64decode(n.removeprefix("base64:")) if n.startswith("base64:") else n.encode()
        for n in names
    ]
    try:
        with redis.Redis.from_url(endpoint, socket_timeout=30) as client:
            client.delete(*keys)
    except redis.RedisError as exc:
        raise ServiceError(f"cannot remove redis keys: {exc}") from None


def _files_remove(endpoint: str, names: Sequence[str]) -> None:
    root = Path(endpoint).resolve()
    for name in names:
        path = (root / name).resolve()
        if not path.is_relative_to(root):
            raise ServiceError(f"file {name!r} is outside the workspace")
        path.unlink(missing_ok=True)


Lister = Callable[[dict[str, object]], list[str]]
Remover = Callable[[str, Sequence[str]], None]
PARTS: dict[str, tuple[Lister, str, Remover]] = {
    "postgres": (_tables, "table ", _postgres_remove),
    "sqlite": (_tables, "table ", _sqlite_remove),
    "redis": (_keys, "key ", _redis_remove),
    "files": (_files, "file ", _files_remove),
}
"""Kind -> how its parts are listed from a description, their label's prefix, and how the
named ones are removed."""


def _describe(kind: str, endpoint: str, limit: int) -> dict[str, object]:
    return dict(get_kind(kind).describe(endpoint, limit=limit))


def parts_of(kind: str, endpoint: str) -> list[str]:
    """The removable parts of the state behind ``endpoint`` (labels such as ``table
    orders``), :data:`EVERYTHING` alone when there are more than :data:`MAX_PARTS`, none
    for a kind with no remover or an empty state."""
    entry = PARTS.get(kind)
    if entry is None:
        return []
    lister, _, _ = entry
    description = _describe(kind, endpoint, MAX_PARTS + 1)
    found = lister(description)
    cut = description.get("truncated")
    if len(found) > MAX_PARTS or (isinstance(cut, dict) and {"keys", "files"} & set(cut)):
        return [EVERYTHING]
    return found


def remove(kind: str, endpoint: str, parts: Sequence[str]) -> None:
    """Remove the named parts (labels from :func:`parts_of`) from the state behind
    ``endpoint``."""
    entry = PARTS.get(kind)
    if entry is None or not parts:
        return
    lister, prefix, remover = entry
    if EVERYTHING in parts:
        # one row per table is enough to list the tables; keys and files are listed whole
        parts = lister(_describe(kind, endpoint, 1 if prefix == "table " else 10**9))
    remover(endpoint, [p.removeprefix(prefix) for p in parts])
