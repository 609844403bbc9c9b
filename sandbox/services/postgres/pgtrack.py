"""Row changes since a restore point, summed by triggers as they happen, so that judging a
replay needs no scan of a changed table.

A table's digest (hash version 2, see :mod:`sandbox.services.postgres.pgstate`) is a row count and
two sums of ``hash_record_extended(row, seed)``: a multiset hash, so rows can be taken out
and put in. At the restore point every eligible table gets three ``AFTER ... FOR EACH
STATEMENT`` triggers with transition tables (insert, update, delete) that add one row to
``sandbox_replayer.changes`` per statement: the table, the operation, and the count and the
two sums of the rows it removed or added. After the run a changed table's digest is its
baseline plus what was added minus what was removed.

The triggers are trusted only when they saw exactly what the server counted: the table's
statistics counters (rows inserted, updated, deleted, which count rolled-back work too and
rows written with triggers disabled) must equal the rows the triggers summed; otherwise, or
when the table's file or columns changed (``TRUNCATE``, a rewrite), it is scanned as
before. Eligible: ordinary logged tables, digested by record, that are neither partitions nor
inheritance parents or children (a parent's transition tables would hold its children's rows).

What the agent can see: the schema ``sandbox_replayer`` (one table, three functions) and the
three triggers ``sbx_track_*`` on each table. The state hash, descriptions and dumps leave the
schema out; a dump taken from a sandbox keeps the triggers, and installing again replaces
everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import psycopg
from psycopg import sql

SCHEMA = "sandbox_replayer"
TRIGGER_PREFIX = "sbx_track_"
_SUMS = (
    "SELECT {op}, count(*), coalesce(sum(hash_record_extended(r, 0)), 0), "
    "coalesce(sum(hash_record_extended(r, 1)), 0) FROM {rows} r"
)
_FUNCTION = """
CREATE FUNCTION sandbox_replayer.{name}() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  {body}
  RETURN NULL;
END $fn$
"""
_INSERT = (
    "INSERT INTO sandbox_replayer.changes (rel, op, n, s0, s1) SELECT TG_RELID, * FROM ({q}) x;"
)
_EVENTS = {
    "ins": ("INSERT", "REFERENCING NEW TABLE AS new_rows", [("'i'", "new_rows")]),
    "upd": (
        "UPDATE",
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
        [("'o'", "old_rows"), ("'n'", "new_rows")],
    ),
    "del": ("DELETE", "REFERENCING OLD TABLE AS old_rows", [("'d'", "old_rows")]),
}
"""Trigger suffix -> event, transition tables, and the rows summed: ``i`` inserted, ``o``
and ``n`` the old and new versions of updated rows, ``d`` deleted."""
_ELIGIBLE = """
SELECT n.nspname || '.' || c.relname FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relpersistence = 'p' AND NOT c.relispartition
  AND NOT c.relhassubclass AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'sandbox_replayer')
  AND n.nspname !~ '^pg_(toast|temp_)'
"""
_DELTAS = """
SELECT rel, op, sum(n), sum(s0)::text, sum(s1)::text
FROM sandbox_replayer.changes GROUP BY rel, op
"""


def install(conn: psycopg.Connection[Any], tables: Iterable[str]) -> set[str]:
    """(Re)create the schema and its functions, and put the triggers on those of ``tables``
    (``schema.name``) that are eligible; the ones that got them."""
    wanted = set(tables)
    conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    conn.execute(f"CREATE SCHEMA {SCHEMA}")
    conn.execute(
        f'CREATE TABLE {SCHEMA}.changes (rel oid NOT NULL, op "char" NOT NULL, '
        "n bigint NOT NULL, s0 numeric NOT NULL, s1 numeric NOT NULL)"
    )
    for event, (_, _, parts) in _EVENTS.items():
        body = " ".join(_INSERT.format(q=_SUMS.format(op=op, rows=rows)) for op, rows in parts)
        conn.execute(_FUNCTION.format(name=f"track_{event}", body=body))
    tracked = set()
    for (key,) in conn.execute(_ELIGIBLE).fetchall():
        if key not in wanted:
            continue
        table = sql.Identifier(*str(key).split(".", 1))
        for event, (verb, referencing, _parts) in _EVENTS.items():
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER {} AFTER {} ON {} {} FOR EACH STATEMENT "
                    "EXECUTE FUNCTION sandbox_replayer.{}()"
                ).format(
                    sql.Identifier(TRIGGER_PREFIX + event),
                    sql.SQL(verb),
                    table,
                    sql.SQL(referencing),
                    sql.Identifier(f"track_{event}"),
                )
            )
        tracked.add(str(key))
    return tracked


def changes_recorded(conn: psycopg.Connection[Any]) -> bool:
    """Whether the triggers summed any statement since they were installed."""
    found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone()
    if found is None:
        return False
    return conn.execute(f"SELECT 1 FROM {SCHEMA}.changes LIMIT 1").fetchone() is not None


def changed_digests(
    conn: psycopg.Connection[Any],
    baseline: Mapping[str, Mapping[str, Any]],
    changed: Mapping[str, tuple[int, int, int, int]],
) -> dict[str, Any]:
    """The digests, with their columns, of the ``changed`` tables (``schema.name`` -> oid and
    the rows inserted, updated, deleted as the server counted them) whose triggers summed
    exactly those rows: their baseline digest plus what was added, minus what was
    removed."""
    found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone()
    if found is None:
        return {}
    sums: dict[int, dict[str, tuple[int, int, int]]] = {}
    for rel, op, n, s0, s1 in conn.execute(_DELTAS):
        sums.setdefault(int(rel), {})[str(op)] = (int(n), int(s0), int(s1))
    out: dict[str, Any] = {}
    none = (0, 0, 0)
    for key, (oid, inserted, updated, deleted) in changed.items():
        base = baseline.get(key)
        rows = (base or {}).get("rows") or {}
        if base is None or not base.get("tracked") or rows.get("by") != "record":
            continue
        seen = sums.get(oid, {})
        ins, old, new, dele = (seen.get(op, none) for op in "iond")
        if (ins[0], old[0], new[0], dele[0]) != (inserted, updated, updated, deleted):
            continue  # the triggers missed rows the server counted: scan the table
        sums_after = [
            int(rows["sums"][i]) + ins[1 + i] + new[1 + i] - old[1 + i] - dele[1 + i]
            for i in (0, 1)
        ]
        out[key] = {
            "columns": base["columns"],
            "rows": {
                "count": int(rows["count"]) + inserted - deleted,
                "sums": [str(s) for s in sums_after],
                "by": "record",
            },
        }
    return out
