"""The logical state of a Postgres database, hashed inside the server, and the baseline that
lets a sandbox rehash only the tables a run changed.

Rows are hashed where they are: per table, one aggregate query returns the row count and a
digest of the rows whatever their physical order, so nothing per row crosses the wire.

- Hash version 2 (new captures): the two sums of ``hash_record_extended(row, seed)`` over
  the rows, seeds 0 and 1 (a 128-bit multiset digest, computed in one scan, no sort: rows
  equal by their types' equality give equal digests). A table with a column type that has
  no extended hash function (``json``, ``point``, ...) sums ``hashtextextended(row::text,
  seed)`` instead; the digest says which (``"by"``).
- Hash version 1 (captures made before version 2): the SHA-256 of the byte-sorted SHA-256
  digests of the rows' text, now sorted and concatenated by the server instead of Python;
  the values are the same as before, so old snapshots keep their recorded hashes.

A **baseline** is the per-table row digests of a restore point, with each table's file
number (``relfilenode``). After a run, a table whose statistics counters (inserted, updated,
deleted rows) are still zero since the restore point, whose file number did not move
(``TRUNCATE`` and rewrites give a new file) and whose columns are the same keeps its
baseline digest; a changed one whose change triggers summed every row the counters count
gets its baseline digest moved by those sums (:mod:`sandbox.services.postgres.pgtrack`); only the
others are scanned. The counters of every session are flushed by
ending the sessions first, and waiting until they have exited (:func:`end_sessions`).
Unlogged tables are always scanned, and with ``track_counts`` off every table is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

import psycopg
from psycopg import sql

from sandbox.services.postgres import pgtrack
from sandbox.snapshot.hashing import fingerprint

HASH_VERSION = 2
_WAIT_MS = 10_000

_SYSTEM = f"('pg_catalog', 'information_schema', '{pgtrack.SCHEMA}')"
"""Schemas no hash or description covers: the catalogs, and the sandbox's change tracking."""
RELATIONS = f"""
SELECT c.oid, n.nspname, c.relname, c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
  AND n.nspname NOT IN {_SYSTEM}
  AND n.nspname !~ '^pg_(toast|temp_)'
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
_CONSTRAINTS = "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s"
_INDEXES = "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s"
_SEQUENCE = """
SELECT seqtypid::regtype::text, seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle
FROM pg_sequence WHERE seqrelid = %s
"""
SESSION = [
    "SET TimeZone = 'UTC'",
    "SET DateStyle = 'ISO, YMD'",
    "SET IntervalStyle = 'postgres'",
    "SET extra_float_digits = 1",
    "SET bytea_output = 'hex'",
    "SET lc_monetary = 'C'",
    "SET search_path = pg_catalog",
]
_ROWS_V1 = (
    "SELECT count(*), sha256(coalesce(string_agg(d, ''::bytea ORDER BY d), ''::bytea)) "
    "FROM (SELECT sha256(convert_to(ROW(sbx_row.*)::text, 'UTF8')) AS d "
    "FROM ONLY {} sbx_row) AS sbx_digests"
)
_ROWS_V2 = {
    "record": "SELECT count(*), coalesce(sum(hash_record_extended(sbx_row, 0)), 0)::text, "
    "coalesce(sum(hash_record_extended(sbx_row, 1)), 0)::text FROM ONLY {} sbx_row",
    "text": "SELECT count(*), coalesce(sum(hashtextextended(sbx_row::text, 0)), 0)::text, "
    "coalesce(sum(hashtextextended(sbx_row::text, 1)), 0)::text FROM ONLY {} sbx_row",
}
_TABLE_FILES = f"""
SELECT c.oid, n.nspname || '.' || c.relname, c.relfilenode, c.relpersistence,
       pg_stat_get_tuples_inserted(c.oid), pg_stat_get_tuples_updated(c.oid),
       pg_stat_get_tuples_deleted(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname NOT IN {_SYSTEM}
  AND n.nspname !~ '^pg_(toast|temp_)'
"""

Baseline = dict[str, Any]
"""``{"hash_version": 2, "database_oid": 16384,
"tables": {"schema.name": {"rows", "columns", "file"}}}``."""


def table_key(schema: str, name: str) -> str:
    return f"{schema}.{name}"


def rows_digest(
    conn: psycopg.Connection[Any], ident: sql.Identifier, version: int, *, empty: bool = False
) -> Any:
    """One table's row count and digest, computed by the server (see the module doc);
    ``empty``: the digest the table would have with no rows (the same query over none)."""
    where = sql.SQL(" WHERE false" if empty else "")
    if version == 1:
        row = conn.execute(sql.SQL(_ROWS_V1 + "{}").format(ident, where)).fetchone()
        assert row is not None
        return {"count": int(row[0]), "sha256": bytes(row[1]).hex()}
    try:
        with conn.transaction():
            row = conn.execute(sql.SQL(_ROWS_V2["record"] + "{}").format(ident, where)).fetchone()
        by = "record"
    except psycopg.errors.UndefinedFunction:  # a column type with no extended hash function
        row = conn.execute(sql.SQL(_ROWS_V2["text"] + "{}").format(ident, where)).fetchone()
        by = "text"
    assert row is not None
    return {"count": int(row[0]), "sums": [str(row[1]), str(row[2])], "by": by}


def logical_state(
    conn: psycopg.Connection[Any],
    *,
    version: int = HASH_VERSION,
    known: Mapping[str, Mapping[str, Any]] | None = None,
    empty: Set[str] = frozenset(),
    sequences: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """The database as plain data: extensions and, for every relation in name order, its
    schema, its rows (a count and a digest, see the module doc) and, for a sequence, its
    current value. ``known`` gives the row digest and columns of tables known not to have
    changed (see :func:`table_digests`): a table whose columns are still those is not
    scanned. The tables in ``empty`` (``schema.name``) are hashed as if they had no rows (a
    partial capture, see :mod:`sandbox.services.postgres.pgtouched`); ``sequences`` gives the values
    of sequences as read earlier (sequences are not transactional: a snapshot does not keep
    their past values)."""
    for stmt in SESSION:
        conn.execute(stmt)
    known = known or {}
    extensions = sorted(
        (str(n), str(v)) for n, v in conn.execute("SELECT extname, extversion FROM pg_extension")
    )
    relations = []
    rows = sorted(conn.execute(RELATIONS).fetchall(), key=lambda r: (r[1], r[2]))
    for oid, schema, name, relkind in rows:
        ident = sql.Identifier(schema, name)
        rel: dict[str, Any] = {"schema": schema, "name": name, "kind": relkind}
        if relkind != "S":
            rel["columns"] = [list(r) for r in conn.execute(_COLUMNS, (oid,))]
            rel["constraints"] = sorted(list(r) for r in conn.execute(_CONSTRAINTS, (oid,)))
            rel["indexes"] = sorted(str(r[0]) for r in conn.execute(_INDEXES, (oid,)))
        if relkind in ("v", "m"):
            view = conn.execute("SELECT pg_get_viewdef(%s::oid)", (oid,)).fetchone()
            rel["definition"] = view[0] if view else None
        if relkind == "S":
            params = conn.execute(_SEQUENCE, (oid,)).fetchone()
            rel["sequence"] = [str(p) for p in params] if params else None
            pinned = (sequences or {}).get(table_key(schema, name))
            if pinned is not None:
                rel["value"] = [str(v) for v in pinned]
            else:
                value = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(ident))
                rel["value"] = [str(v) for v in value.fetchone() or ()]
        if relkind == "r":
            found = known.get(table_key(schema, name))
            if found is not None and found.get("columns") == rel["columns"]:
                rel["rows"] = found["rows"]
            else:
                key = table_key(schema, name)
                rel["rows"] = rows_digest(conn, ident, version, empty=key in empty)
        relations.append(rel)
    return {"extensions": extensions, "relations": relations}


def sequence_values(conn: psycopg.Connection[Any]) -> dict[str, list[Any]]:
    """Every sequence's ``[last_value, is_called]`` now, by ``schema.name``."""
    out: dict[str, list[Any]] = {}
    for _oid, schema, name, relkind in conn.execute(RELATIONS).fetchall():
        if relkind == "S":
            ident = sql.Identifier(schema, name)
            value = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(ident))
            out[table_key(schema, name)] = list(value.fetchone() or ())
    return out


def set_sequences(conn: psycopg.Connection[Any], values: Mapping[str, Sequence[Any]]) -> None:
    """Set sequences (``schema.name``) to ``[last_value, is_called]``; those gone are
    skipped."""
    for key, (last, called) in sorted(values.items()):
        schema, _, name = key.partition(".")
        ident = sql.Identifier(schema, name).as_string(conn)
        conn.execute(
            "SELECT setval(c.oid, %s, %s) FROM pg_class c WHERE c.oid = to_regclass(%s)",
            (int(last), bool(called), ident),
        )


def table_digests(state: Mapping[str, Any]) -> dict[str, Any]:
    """The row digest and columns of every table of a :func:`logical_state`, by
    ``schema.name``."""
    return {
        table_key(r["schema"], r["name"]): {"rows": r["rows"], "columns": r["columns"]}
        for r in state["relations"]
        if "rows" in r
    }


def state_fingerprint(state: Mapping[str, Any]) -> str:
    return fingerprint({"kind": "postgres", "state": state})


def end_sessions(conn: psycopg.Connection[Any], dbname: str, parking: str) -> None:
    """End every other session on ``dbname`` and wait until each has exited (connected to
    another database). A session flushes its statistics counters as it exits, after it left
    ``pg_stat_activity`` but before it leaves the server's process list: renaming the
    database to ``parking`` and back waits for that list to hold no session of it."""
    conn.execute(
        "SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (_WAIT_MS, dbname),
    )
    rename = sql.SQL("ALTER DATABASE {} RENAME TO {}")
    conn.execute(rename.format(sql.Identifier(dbname), sql.Identifier(parking)))
    conn.execute(rename.format(sql.Identifier(parking), sql.Identifier(dbname)))


def make_baseline(
    conn: psycopg.Connection[Any],
    version: int,
    digests: Mapping[str, Any],
    tracked: Set[str] = frozenset(),
) -> Baseline:
    """The baseline of the database ``conn`` is connected to, whose tables have ``digests``
    and ``tracked`` have change triggers (see :mod:`sandbox.services.postgres.pgtrack`); made right
    before its statistics are reset."""
    files = {str(r[1]): int(r[2]) for r in conn.execute(_TABLE_FILES)}
    tables = {
        k: {**v, "file": files[k], "tracked": k in tracked}
        for k, v in digests.items()
        if k in files
    }
    return {"hash_version": version, "database_oid": database_oid(conn), "tables": tables}


def database_oid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


def known_tables(conn: psycopg.Connection[Any], baseline: Baseline) -> dict[str, Any]:
    """The row digests and columns of the baseline's tables known without a scan since the
    statistics were last reset (call :func:`end_sessions` first): those that did not change
    (counters at zero, same file), and the changed ones whose change triggers account for
    every row the server counted (:func:`sandbox.services.postgres.pgtrack.changed_digests`).
    Unlogged tables are always scanned, as is everything when ``track_counts`` is off."""
    setting = conn.execute("SELECT current_setting('track_counts')::bool").fetchone()
    if not (setting and setting[0]):
        return {}
    conn.execute("SELECT pg_stat_clear_snapshot()")
    tables: Mapping[str, Any] = baseline.get("tables") or {}
    out: dict[str, Any] = {}
    changed: dict[str, tuple[int, int, int, int]] = {}
    for oid, key, filenode, persistence, ins, upd, dele in conn.execute(_TABLE_FILES):
        base = tables.get(str(key))
        if base is None or persistence != "p" or base.get("file") != int(filenode):
            continue
        counts = (int(ins or 0), int(upd or 0), int(dele or 0))
        if counts == (0, 0, 0):
            out[str(key)] = base
        else:
            changed[str(key)] = (int(oid), *counts)
    out.update(pgtrack.changed_digests(conn, tables, changed))
    return out
