"""Touched-state capture for Postgres: the rows of only the tables a run read or wrote, the
schema of all, so that a run touching three tables of a large database captures in about a
second and still replays.

How (the kind's :meth:`~sandbox.services.postgres.PostgresKind.pin`):

1. Where a whole capture would dump the restore point, a REPEATABLE READ transaction is
   opened instead and its snapshot exported (``pg_export_snapshot()``); it stays open during
   the run and pins the pre-run state. It holds no lock on any table: each table's
   statistics counters (scans, rows inserted, updated, deleted) and file number
   (:func:`counters`) and the sequences' values are read in a subtransaction that is rolled
   back, which lets go of the locks those reads took.
2. While the run goes on, its statements are noted at the psycopg cursors
   (:mod:`sandbox.services.postgres.pgseen`). When the run is kept (off the agent's path,
   :mod:`sandbox.capture.finisher`), the tables they reach are told from their text and
   the catalog as of the pin (:mod:`sandbox.services.postgres.pgreach`), closed over the
   tables their foreign keys reference (:func:`captured_tables`): a restored row must find
   the row it references, or ``pg_restore`` fails adding the constraint. Tables that
   reference a touched one need nothing: restored empty they reference nothing.
   When the statements cannot tell (dynamic SQL, a client whose statements are not seen),
   the counters do: the sessions that were busy during the run are waited for until their
   counters are flushed (:func:`unflushed`): a session flushes as it exits (before it
   leaves ``pg_stat_activity``) and, when it stays connected, at the latest
   :data:`FLUSH_IDLE_S` after it went idle (PostgreSQL 15's ``PGSTAT_IDLE_INTERVAL``). The
   tables whose counters or file moved are the touched ones (:func:`touched`). Under
   steady load sessions are never idle: the wait ends at its limit and the whole state is
   taken.
3. ``pg_dump --snapshot=ID --exclude-table-data=...`` dumps the schema of every table and
   the rows of the captured ones as they were before the run, while a transaction of its
   own that imports the snapshot hashes the same state; the end state is dumped the same
   way. Both are hashed as the state a sandbox restored from them holds: the other
   tables with no rows (:func:`sandbox.services.postgres.pgstate.logical_state`'s ``empty``).
   Sequences are not transactional (a snapshot does not keep their past values, and
   ``pg_dump`` reads them as they are): their values read at the pin go into the dump's
   header, the hash uses them, and a restore sets them again.

Statistics counters are exact for what this needs because they only ever grow while the
run goes on: a superset of tables (another client's work, autovacuum's file rewrites) costs
bytes, never correctness. What cannot be told is said and the capture falls back to the
whole database, still as of the pinned snapshot: ``track_counts`` off, a server older than
15 (its statistics collector flushes asynchronously), sessions whose activity cannot be
seen (no ``pg_read_all_stats``), or sessions still busy after :data:`WAIT_ENV` seconds.

On replay the sandbox's own counters (reset at the restore point) say which tables the
replayed agent read or wrote: one outside the captured set (:func:`outside`) makes the
verdict inconclusive, since its rows were not there to be read.

Statements name views, functions, triggers and policies that reach other tables: those are
followed in the catalog (:mod:`sandbox.services.postgres.pgreach`); what cannot be followed
falls back to the counters, and what is still missed shows on replay (:func:`outside`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from sandbox.errors import ServiceError

STATE_META = "state"
"""Key of a service's manifest meta saying how its state was captured: ``"touched"``."""
ROWS_META = "rows_of"
"""Key of the manifest meta listing the tables (``schema.name``) whose rows were captured."""
TABLES_META = "tables"
"""Key of the manifest meta counting every table of the database."""
NOTE_META = "note"
"""Key of the manifest meta saying why a touched capture fell back to the whole state."""
TOLD_META = "told_by"
"""Key of the manifest meta saying how the touched tables were told: ``"statements"`` (the
run's own, :mod:`sandbox.services.postgres.pgreach`) or ``"counters"``."""
STATEMENTS_NOTE_META = "statements_note"
"""Key of the manifest meta saying why the statements could not tell the touched tables."""
PINNED_AT_META = "pinned_at"
"""Key of the manifest meta giving the server's time when the captured state before the run
was pinned (a pin shared among runs that start together may predate this run's start, see
:mod:`sandbox.services.pinshare`)."""

FLUSH_IDLE_S = 10.5
"""An idle session's counters are flushed at most this long after it went idle."""
WAIT_ENV = "SANDBOX_PG_TOUCHED_WAIT"
DEFAULT_WAIT_S = 30.0
"""How long a touched capture waits for busy sessions before it falls back to whole."""

_COUNTERS = """
SELECT s.schemaname || '.' || s.relname, c.relfilenode, s.seq_scan, coalesce(s.idx_scan, 0),
       s.n_tup_ins, s.n_tup_upd, s.n_tup_del
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE c.relkind = 'r' AND s.schemaname NOT IN ('sandbox_replayer')
"""
_REFERENCES = """
SELECT sn.nspname || '.' || s.relname, d.oid
FROM pg_constraint k
JOIN pg_class s ON s.oid = k.conrelid JOIN pg_namespace sn ON sn.oid = s.relnamespace
JOIN pg_class d ON d.oid = k.confrelid
WHERE k.contype = 'f'
"""
_LEAVES = """
SELECT n.nspname || '.' || c.relname FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r'
  AND (c.oid = %(oid)s OR c.oid IN (SELECT relid FROM pg_partition_tree(%(oid)s::regclass)))
"""
_BUSY = """
SELECT pid, state, extract(epoch FROM clock_timestamp() - state_change)
FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> ALL(%s) AND (state IS NULL OR state_change IS NULL OR state_change >= %s)
"""

Counters = dict[str, tuple[int, ...]]
"""``schema.name`` -> file number, scans (sequential, index), rows inserted, updated,
deleted."""


def counters(conn: psycopg.Connection[Any]) -> Counters:
    """Every user table's statistics counters and file number, as the server has them now
    (the statistics snapshot of the transaction is cleared first)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {str(r[0]): tuple(int(v or 0) for v in r[1:]) for r in conn.execute(_COUNTERS)}


def untrackable(conn: psycopg.Connection[Any]) -> str | None:
    """Why this server's counters cannot tell the touched tables, or ``None``."""
    on = conn.execute("SELECT current_setting('track_counts')::bool").fetchone()
    if not (on and on[0]):
        return "statistics are off on the server (track_counts), so the whole state was captured"
    if conn.info.server_version < 150000:
        return (
            "the server is older than PostgreSQL 15 (its statistics are flushed "
            "asynchronously), so the whole state was captured"
        )
    return None


def touched(before: Counters, after: Counters) -> set[str]:
    """The tables of ``before`` whose counters or file moved, or that are gone."""
    return {k for k, v in before.items() if after.get(k) != v}


def captured_tables(conn: psycopg.Connection[Any], tables: Collection[str]) -> set[str]:
    """``tables`` with, transitively, the tables their foreign keys reference (the leaf
    partitions of a partitioned one), read in the transaction of ``conn``."""
    refs: dict[str, set[int]] = {}
    for source, target in conn.execute(_REFERENCES):
        refs.setdefault(str(source), set()).add(int(target))
    out = set(tables)
    todo = list(out)
    while todo:
        for oid in refs.get(todo.pop(), ()):
            for (leaf,) in conn.execute(_LEAVES, {"oid": oid}).fetchall():
                if str(leaf) not in out:
                    out.add(str(leaf))
                    todo.append(str(leaf))
    return out


def unflushed(
    conn: psycopg.Connection[Any], since: Any, ours: Collection[int]
) -> tuple[list[int], str | None]:
    """The sessions on the database, besides ``ours``, that were busy after ``since`` (the
    server's time at the pin) and may still hold counters they have not flushed; and why
    that cannot be told, when it cannot (another role's sessions, hidden without
    ``pg_read_all_stats``)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    waiting = []
    for pid, state, idle in conn.execute(_BUSY, (list(ours), since)).fetchall():
        if state is None:
            return [], (
                f"the activity of session {pid} cannot be seen (grant pg_read_all_stats), "
                "so the whole state was captured"
            )
        if state != "idle" or idle is None or float(idle) < FLUSH_IDLE_S:
            waiting.append(int(pid))
    return waiting, None


def wait_limit() -> float:
    """Seconds to wait for busy sessions: :data:`WAIT_ENV`, or :data:`DEFAULT_WAIT_S`."""
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ServiceError(f"{WAIT_ENV}={raw!r}: expected a number of seconds")
    return value


def settle(
    conn: psycopg.Connection[Any],
    since: Any,
    ours: Collection[int],
    *,
    limit: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """Wait until every session busy during the run has flushed its counters (see
    :func:`unflushed`); why the touched tables cannot be told, when they cannot."""
    deadline = clock() + limit
    while True:
        waiting, why = unflushed(conn, since, ours)
        if why is not None or not waiting:
            return why
        if clock() >= deadline:
            return (
                f"{len(waiting)} session(s) were still busy {limit:g}s after the run "
                f"(pid {', '.join(map(str, waiting[:5]))}), so the whole state was captured"
            )
        sleep(0.25)


def exclusions(tables: Collection[str]) -> list[str]:
    """``pg_dump`` arguments that leave out the rows of ``tables`` (``schema.name``), each
    named exactly (quoted: no pattern characters)."""
    return [f"--exclude-table-data={_pattern(t)}" for t in sorted(tables)]


def _pattern(key: str) -> str:
    schema, _, name = key.partition(".")
    return ".".join('"' + part.replace('"', '""') + '"' for part in (schema, name))


@dataclass(frozen=True)
class Outside:
    """A table the replayed run read or wrote (one whose rows were not captured, for
    :func:`outside`)."""

    table: str
    wrote: bool

    def used(self) -> str:
        return f"{'wrote' if self.wrote else 'read'} table {self.table}"

    def describe(self) -> str:
        return f"{self.used()}, whose rows were not captured"


def outside(now: Counters, captured: Collection[str]) -> list[Outside]:
    """The tables not in ``captured`` whose counters moved since they were reset (the
    restore point), ``now`` as :func:`counters` gives them."""
    keep = set(captured)
    out = []
    for key, (_, seq, idx, ins, upd, dele) in sorted(now.items()):
        if key in keep or not (seq or idx or ins or upd or dele):
            continue
        out.append(Outside(key, wrote=bool(ins or upd or dele)))
    return out


def partial_meta(captured: Collection[str], total: int) -> dict[str, Any]:
    """What the manifest says of a touched capture."""
    return {STATE_META: "touched", ROWS_META: sorted(captured), TABLES_META: total}


def describe_meta(meta: Mapping[str, Any]) -> str | None:
    """``"partial: rows of 2 of 5 tables (public.a, public.b)"`` for a touched capture;
    the note of one that fell back; ``None`` for a whole one."""
    if meta.get(STATE_META) != "touched":
        note = meta.get(NOTE_META)
        return f"whole: {note}" if isinstance(note, str) else None
    rows = [str(t) for t in meta.get(ROWS_META) or []]
    listed = ", ".join(rows[:8]) + (", ..." if len(rows) > 8 else "")
    return f"partial: rows of {len(rows)} of {meta.get(TABLES_META)} tables ({listed})"
