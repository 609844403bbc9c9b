"""Dumps made without ``pg_dump``: the header and TOC of an earlier ``pg_dump`` archive of
the same database, same schema and same tables left empty (:mod:`.pgarchive`), filled with
the rows of its tables read by ``COPY`` in the transaction that hashes them.

``pg_dump`` costs about 75 ms of the machine's CPU a dump even for a small database, half
of it the server's (it reads every catalog), whatever the rows; a service keeping its failed
runs dumps their touched tables again and again under the same schema. The schema is named
by its fingerprint (:mod:`.pgschema`) read in the dump's own snapshot, so a head is reused
only when nothing it holds could have changed. Rows are read this way only up to
:data:`ROWS_LIMIT` bytes of the tables (more is left to ``pg_dump``'s own process, off this
interpreter), and the ``COPY`` runs with the settings ``pg_dump`` gives its session, so the
archive is the one ``pg_dump`` would have written but for how its compressed chunks are cut
(an archive ``pg_dump`` wrote is cut the same way, see :meth:`Heads.learn`) and the sequences'
values in its TOC, which are the head's (the capture's header holds the dump's own, and a
restore sets them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any

import psycopg
from psycopg import sql

from sandbox.errors import ServiceError
from sandbox.services.postgres import pgarchive
from sandbox.services.postgres.pgarchive import Layout

ROWS_LIMIT = 8 << 20
"""The most bytes of tables (rows and TOAST) whose rows a dump reads in this process."""
KEPT = 32
"""The heads kept, the least recently used dropped first."""

_SESSION = (
    "SET LOCAL DateStyle = ISO",
    "SET LOCAL IntervalStyle = postgres",
    "SET LOCAL extra_float_digits = 3",
    "SET LOCAL row_security = off",
)
"""What ``pg_dump`` sets in its session before it reads rows (its client encoding is the
database's: set apart)."""

_SIZE = (
    "SELECT coalesce(sum(pg_catalog.pg_table_size(format('%%I.%%I', s, t)::regclass)), 0) "
    "FROM unnest(%s::text[], %s::text[]) AS x(s, t)"
)


class Heads:
    """Layouts of archives dumped lately, by a key naming the endpoint, its schema's
    fingerprint, the tables left empty and the compression."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._layouts: OrderedDict[Hashable, Layout] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Layout | None:
        with self._lock:
            found = self._layouts.get(key)
            if found is not None:
                self._layouts.move_to_end(key)
            return found

    def put(self, key: Hashable, layout: Layout) -> None:
        with self._lock:
            self._layouts[key] = layout
            self._layouts.move_to_end(key)
            while len(self._layouts) > self._kept:
                self._layouts.popitem(last=False)

    def usable(self, conn: psycopg.Connection[Any], key: Hashable) -> Layout | None:
        """The head kept for ``key`` when its tables fit (:func:`fits`) in ``conn``'s snapshot."""
        found = self.get(key)
        return found if found is not None and fits(conn, found) else None

    def learn(self, conn: psycopg.Connection[Any], key: Hashable, dump: bytes, level: int) -> bytes:
        """Keep the head of ``dump``, an archive ``pg_dump`` wrote of ``conn``'s snapshot,
        for ``key``; ``dump`` cut as :func:`dump` would make it of the same rows when its
        tables fit (so an unchanged database stays one blob), else as it is."""
        found = pgarchive.layout(dump)
        if found is None:
            return dump
        self.put(key, found)
        tables = pgarchive.rows(dump) if fits(conn, found) else None
        if tables is None:
            return dump
        return pgarchive.rebuild(found, ([rows] for rows in tables), level)


HEADS = Heads()
"""The heads of the archives this process dumped lately."""


def fits(conn: psycopg.Connection[Any], head: Layout, limit: int = ROWS_LIMIT) -> bool:
    """Whether the tables of ``head`` (their rows and TOAST, not their indexes) hold at
    most ``limit`` bytes; False when one of them is gone (read in a savepoint)."""
    schemas = [t.schema for t in head.tables]
    names = [t.name for t in head.tables]
    try:
        with conn.transaction():
            row = conn.execute(_SIZE, (schemas, names)).fetchone()
    except psycopg.Error:
        return False
    return row is not None and int(row[0]) <= limit


def dump(conn: psycopg.Connection[Any], head: Layout, encoding: str, level: int) -> bytes:
    """The archive of ``head`` with its tables' rows as ``conn``'s transaction sees them
    (the session settings ``pg_dump`` uses are set for the rest of that transaction)."""
    try:
        for statement in _SESSION:
            conn.execute(statement)
        conn.execute(sql.SQL("SET LOCAL client_encoding = {}").format(sql.Literal(encoding)))
        return pgarchive.rebuild(head, (list(_rows(conn, t.copy_out)) for t in head.tables), level)
    except psycopg.Error as exc:
        raise ServiceError(f"reading the rows of a postgres dump: {exc}") from None


def _rows(conn: psycopg.Connection[Any], statement: str) -> Iterator[bytes]:
    with conn.cursor().copy(statement.encode()) as copy:  # from pg_dump's own TOC
        for chunk in copy:
            yield bytes(chunk)
