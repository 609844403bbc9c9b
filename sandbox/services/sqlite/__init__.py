"""The ``sqlite`` service kind: one database file.

Endpoint: a file path, or a ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` URL.

Capture copies the database with SQLite's online backup API (consistent even while another
connection writes), the data being the bytes of a standalone database file. Restore replaces
the file atomically (a temporary file in the same folder, then a rename) after removing any
``-wal``, ``-shm`` or ``-journal`` file left by the old database, which would otherwise be
replayed into the new one. Restore while no connection has the file open.

An SQL invariant is checked by sqlite3 itself (:func:`query_rows`): the file opened
``mode=ro`` with ``PRAGMA query_only`` and an authorizer that allows reads alone.

The state hash is logical: the schema (``sqlite_master``) and, for every table, the rows as
typed values, sorted, so that page layout, free pages and row order do not matter.
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import JsonValue

from sandbox.errors import QueryRefusedError, ServiceError
from sandbox.services.base import DESCRIBE_LIMIT, TRUNCATED, CapturedState, register, table_parts
from sandbox.services.descriptor import ContainerSpec, KindBinding
from sandbox.services.dumptext import Place
from sandbox.services.sqlquery import TIMEOUT_S, read_statement
from sandbox.snapshot.hashing import canonical_json, fingerprint, sha256_bytes

if TYPE_CHECKING:
    from sandbox.services.masking import Masker, MaskRule

MEDIA_TYPE = "application/vnd.sqlite3"
HEADER = b"SQLite format 3\x00"
_SIDE_FILES = ("-wal", "-shm", "-journal")


def db_path(endpoint: str) -> Path:
    if endpoint.startswith("sqlite:///"):
        endpoint = endpoint[len("sqlite:///") :]
    elif "://" in endpoint:
        raise ServiceError(
            f"sqlite endpoint must be a file path or sqlite:/// URL, not {endpoint!r}"
        )
    if not endpoint:
        raise ServiceError("sqlite endpoint is empty: expected a file path")
    return Path(endpoint)


@contextmanager
def _open_ro(path: Path) -> Iterator[sqlite3.Connection]:
    if not path.is_file():
        raise ServiceError(f"sqlite database {path} does not exist")
    try:
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ServiceError(f"cannot open sqlite database {path}: {exc}") from None
    try:
        yield conn
    except sqlite3.Error as exc:
        raise ServiceError(f"sqlite database {path}: {exc}") from None
    finally:
        conn.close()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _typed(value: Any) -> list[Any]:
    if value is None:
        return ["null"]
    if isinstance(value, bytes):
        return ["blob", value.hex()]
    if isinstance(value, float):
        return ["real", repr(value)]
    if isinstance(value, int):
        return ["integer", value]
    return ["text", str(value)]


def logical_state(conn: sqlite3.Connection) -> dict[str, Any]:
    schema = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    ).fetchall()
    tables = {}
    for kind, name, _tbl, text in schema:
        if kind != "table" or (text or "").upper().startswith("CREATE VIRTUAL"):
            continue  # a virtual table's data lives in its shadow tables, hashed themselves
        digests = sorted(
            sha256_bytes(canonical_json([_typed(v) for v in row]))
            for row in conn.execute(f"SELECT * FROM {_quote(name)}")
        )
        tables[name] = {"count": len(digests), "sha256": sha256_bytes("".join(digests).encode())}
    return {"schema": [list(r) for r in schema], "tables": tables}


def _plain(value: Any) -> JsonValue:
    """A column value as JSON: a blob as ``{"base64": ...}``, a non-finite real as text."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, int | float | str):
        return value
    return str(value)


def _order(value: Any) -> tuple[int, Any]:
    """SQLite's own order across types: NULL, numbers, text, blobs."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


def describe_state(conn: sqlite3.Connection, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
    """``{"tables": {table: [row, ...]}}``: every row as ``{column: value}``, ordered by
    primary key then by all columns; a table over ``limit`` rows keeps its first ``limit``
    and is listed under ``"truncated"`` with its row count."""
    names = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).fetchall()
    tables: dict[str, JsonValue] = {}
    truncated: dict[str, JsonValue] = {}
    for name, text in names:
        if (text or "").upper().startswith("CREATE VIRTUAL"):
            continue
        info = conn.execute(f"PRAGMA table_info({_quote(name)})").fetchall()
        columns = [str(c[1]) for c in info]
        keys = [columns.index(str(c[1])) for c in sorted(info, key=lambda c: c[5]) if c[5]]
        rows = conn.execute(f"SELECT * FROM {_quote(name)}").fetchall()
        rows.sort(key=lambda r: ([_order(r[i]) for i in keys], [_order(v) for v in r]))
        tables[name] = [
            {col: _plain(v) for col, v in zip(columns, row, strict=False)} for row in rows[:limit]
        ]
        if len(rows) > limit:
            truncated[name] = len(rows)
    out: dict[str, JsonValue] = {"tables": tables}
    if truncated:
        out[TRUNCATED] = truncated
    return out


def backup_bytes(path: Path) -> bytes:
    """A consistent copy of the database at ``path`` as the bytes of a database file."""
    with _open_ro(path) as src, tempfile.TemporaryDirectory(prefix="sbx-sqlite-") as tmp:
        target = Path(tmp) / "backup.db"
        dest = sqlite3.connect(target)
        try:
            src.backup(dest)
        finally:
            dest.close()
        return target.read_bytes()


_READS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
"""What an invariant's statement may do (an authorizer denies the rest: writes, ``ATTACH``,
pragmas, transactions)."""


def _reads_only(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _READS else sqlite3.SQLITE_DENY


def query_rows(path: Path, text: str, limit: int) -> list[tuple[Any, ...]]:
    """The first ``limit`` rows of one read-only statement (see
    :func:`~sandbox.services.sqlquery.read_statement`) against the database at ``path``,
    opened read-only (``mode=ro``) with ``PRAGMA query_only``, an authorizer that allows
    reads alone, and a time limit."""
    statement, _ = read_statement(text)
    if not path.is_file():
        raise ServiceError(f"sqlite database {path} does not exist")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ServiceError(f"cannot open sqlite database {path}: {exc}") from None
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(_reads_only)
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        cursor = conn.execute(statement)
        if cursor.description is None:
            raise QueryRefusedError("the statement returns no rows to check")
        return list(cursor.fetchmany(limit))
    except sqlite3.Error as exc:
        text = str(exc)
        if "interrupted" in text:
            raise QueryRefusedError(f"it ran past its time limit ({TIMEOUT_S:g} s)") from None
        if "not authorized" in text or "readonly" in text:
            raise QueryRefusedError(f"it tried more than reading: {text}") from None
        raise ServiceError(f"sqlite database {path}: {type(exc).__name__}: {text}") from None
    finally:
        conn.close()


class SQLiteKind:
    """Capture with the backup API, restore by an atomic replace of the file."""

    name: ClassVar[str] = "sqlite"
    binding: ClassVar[KindBinding] = KindBinding(path="file")
    container: ClassVar[ContainerSpec | None] = None

    dump_media_types: ClassVar[frozenset[str]] = frozenset({MEDIA_TYPE})

    def mask(
        self, endpoint: str, state: CapturedState, rules: list[MaskRule], masker: Masker
    ) -> CapturedState:
        """See :mod:`sandbox.services.sqlite.masking`."""
        from sandbox.services.sqlite.masking import mask_sqlite

        return mask_sqlite(self, endpoint, state, rules, masker)

    part_label: ClassVar[str] = "table "

    def parts(self, description: Mapping[str, Any]) -> list[str]:
        return table_parts(description)

    def remove_parts(self, endpoint: str, names: Sequence[str]) -> None:
        """Delete the rows of the tables in one transaction (the schema is kept)."""
        try:
            with contextlib.closing(sqlite3.connect(db_path(endpoint))) as conn, conn:
                for name in names:
                    conn.execute('DELETE FROM "' + name.replace('"', '""') + '"')
        except sqlite3.Error as exc:
            raise ServiceError(f"cannot remove rows of {', '.join(names)}: {exc}") from None

    def dump_places(self, media_type: str, data: bytes) -> Iterator[Place]:
        """The text values of a capture by table, column and row."""
        from sandbox.services.sqlite.dumptext import sqlite_places

        return sqlite_places(data)

    def __init__(self) -> None:
        self._points: dict[str, bytes] = {}

    def create_missing(self, endpoint: str) -> None:
        path = db_path(endpoint)
        if not path.exists():
            with contextlib.suppress(sqlite3.Error):
                sqlite3.connect(path).close()

    def capture(self, endpoint: str) -> CapturedState:
        path = db_path(endpoint)
        data = backup_bytes(path)
        with _open_ro(path) as conn:
            version = str(conn.execute("SELECT sqlite_version()").fetchone()[0])
        return CapturedState(
            data=data,
            state_hash=_hash_bytes(data),
            version=version,
            media_type=MEDIA_TYPE,
            meta={"file": path.name},
        )

    def restore(self, endpoint: str, data: bytes) -> None:
        if data and not data.startswith(HEADER):
            raise ServiceError("not a sqlite capture: the data is not an SQLite database file")
        path = db_path(endpoint)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".sbx-", suffix=".db")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            for suffix in _SIDE_FILES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{suffix}")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def state_hash(self, endpoint: str) -> str:
        with _open_ro(db_path(endpoint)) as conn:
            return fingerprint({"kind": "sqlite", "state": logical_state(conn)})

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """See :func:`describe_state`."""
        with _open_ro(db_path(endpoint)) as conn:
            return describe_state(conn, limit)

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """Describe ``data`` from a temporary file (``endpoint`` is not touched)."""
        with tempfile.TemporaryDirectory(prefix="sbx-sqlite-") as tmp:
            path = Path(tmp) / "expected.db"
            self.restore(str(path), data)
            return self.describe(str(path), limit=limit)

    def query(
        self, endpoint: str, text: str, *, limit: int, sandboxed: bool
    ) -> list[tuple[Any, ...]]:
        """Check an invariant (:func:`query_rows`; confined the same way everywhere)."""
        return query_rows(db_path(endpoint), text, limit)

    def mark_restore_point(self, endpoint: str) -> None:
        self._points[endpoint] = backup_bytes(db_path(endpoint))

    def reset(self, endpoint: str) -> None:
        try:
            data = self._points[endpoint]
        except KeyError:
            raise ServiceError(
                f"no restore point for sqlite database {endpoint}: call mark_restore_point first"
            ) from None
        self.restore(endpoint, data)


def _hash_bytes(data: bytes) -> str:
    """The state hash of a database given as bytes (hashed from a temporary copy)."""
    with tempfile.TemporaryDirectory(prefix="sbx-sqlite-") as tmp:
        path = Path(tmp) / "state.db"
        path.write_bytes(data)
        return SQLiteKind().state_hash(str(path))


KIND = register(SQLiteKind())
