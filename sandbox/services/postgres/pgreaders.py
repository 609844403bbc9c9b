"""Connections kept open between the capture's reads of a Postgres server.

The capture reads a database in read-only transactions of its own: a pin (the state
before the runs starting together, held while they run) and, for a kept run, short ones
that dump its states. A new connection for each costs the server a backend (about 3 ms of
its CPU), and that backend's first reads of the catalogs (the schema's fingerprint:
:mod:`.pgschema`) cost about 8 ms more than the same reads on a backend that has made them
before. :data:`READERS` keeps a few connections of this process open after such a
transaction, for the next one: at most :data:`IDLE_MAX` for each server and database,
closed once idle :data:`IDLE_S` seconds (looked at when one is taken or given back).

A connection is given back only when its transaction ended (rolled back: what it set
inside is undone) and nothing broke it; one taken after sitting idle is first asked for
``SELECT 1``, and replaced by a new one if the server ended it meanwhile. The connections
of a parent process are never used in a child it forked (their sessions are the parent's).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

IDLE_MAX = 2
"""Connections kept open for each server and database."""
IDLE_S = 30.0
"""Seconds a kept connection may sit unused before it is closed."""
UNANSWERED_MS = 10_000
"""Milliseconds a kept connection's data may go unacknowledged by the server before the
connection is given up (libpq's ``tcp_user_timeout``)."""

Opener = Callable[[], psycopg.Connection[Any]]


class Readers:
    """Idle connections by connection string; see the module doc."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._fresh()
        after_fork = weakref.WeakMethod(self._fresh)
        os.register_at_fork(after_in_child=lambda: (call := after_fork()) and call())

    def _fresh(self) -> None:
        """No connection kept, none lent (and in a forked child: none of the parent's,
        left open, since closing them would end the parent's sessions, nor its lock, which
        a parent's thread may have held)."""
        self._lock = threading.Lock()
        self._idle: dict[str, list[tuple[psycopg.Connection[Any], float]]] = {}
        self._lent: set[int] = set()
        """The server processes of the connections in use now."""

    @contextlib.contextmanager
    def connection(self, key: str, open_new: Opener) -> Iterator[psycopg.Connection[Any]]:
        """A connection for ``key`` (autocommit, no transaction open): a kept one that still
        answers, else ``open_new()``. Given back when the block ends with it idle and whole;
        closed otherwise."""
        conn = self._take(key) or open_new()
        pid = conn.info.backend_pid
        with self._lock:
            self._lent.add(pid)
        try:
            yield conn
        finally:
            with self._lock:
                self._lent.discard(pid)
            if not self._give_back(key, conn):
                conn.close()

    def pids(self) -> set[int]:
        """The server processes of the connections kept or in use now (the capture's own
        sessions)."""
        with self._lock:
            kept = {c.info.backend_pid for held in self._idle.values() for c, _ in held}
            return kept | self._lent

    def close(self) -> None:
        """Close every kept connection."""
        with self._lock:
            held = [c for conns in self._idle.values() for c, _ in conns]
            self._idle.clear()
        for conn in held:
            with contextlib.suppress(Exception):
                conn.close()

    def _take(self, key: str) -> psycopg.Connection[Any] | None:
        while True:
            with self._lock:
                stale = self._expire()
                conns = self._idle.get(key)
                conn = conns.pop()[0] if conns else None
            for old in stale:
                with contextlib.suppress(Exception):
                    old.close()
            if conn is None:
                return None
            try:
                conn.execute("SELECT 1")
                return conn
            except psycopg.Error:  # the server ended it while it was kept
                with contextlib.suppress(Exception):
                    conn.close()

    def _give_back(self, key: str, conn: psycopg.Connection[Any]) -> bool:
        whole = (
            not conn.closed
            and not conn.broken
            and conn.autocommit
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        if not whole:
            return False
        with self._lock:
            conns = self._idle.setdefault(key, [])
            if len(conns) >= IDLE_MAX:
                return False
            conns.append((conn, self._clock()))
            return True

    def _expire(self) -> list[psycopg.Connection[Any]]:
        """Take out the connections idle too long (under the lock); they are to be closed."""
        limit = self._clock() - IDLE_S
        stale = []
        for key, conns in list(self._idle.items()):
            stale += [c for c, since in conns if since < limit]
            kept = [(c, since) for c, since in conns if since >= limit]
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        return stale


READERS = Readers()
"""The connections this process keeps for its reads of Postgres states."""
