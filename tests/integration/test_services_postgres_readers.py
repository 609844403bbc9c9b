"""The connections the capture keeps open between its reads of a Postgres state, against a
real server: the next capture reads on the same session, which keeps nothing of the one
before (its time zone is still the database's); one the server ended is replaced; no more
than ``IDLE_MAX`` are kept, none longer than ``IDLE_S`` idle, and a forked child never uses
its parent's."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from sandbox.services.postgres import pgreaders
from sandbox.services.postgres.kind import TIMEZONE_META, _Endpoint
from sandbox.services.registry import get_kind

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def db(server: str) -> Iterator[str]:
    endpoint = create_database(server, "readers")
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute("ALTER DATABASE readers SET timezone TO 'Asia/Tokyo'")
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, at timestamptz DEFAULT now())")
        conn.execute("INSERT INTO orders (id) VALUES (1), (2)")
    yield endpoint
    pgreaders.READERS.close()


def _sessions(endpoint: str) -> list[tuple[int, str]]:
    """The other client sessions on the database: (pid, state)."""
    with psycopg.connect(endpoint, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, coalesce(state, '') FROM pg_stat_activity WHERE datname = "
            "current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return sorted((int(p), str(s)) for p, s in rows)


def _settled(endpoint: str, most: int) -> list[tuple[int, str]]:
    """:func:`_sessions` once at most ``most`` are left, or as they are after 10 s: a
    closed or ended session's backend leaves ``pg_stat_activity`` a moment after its client
    let go (seen in CI, under load)."""
    deadline = time.monotonic() + 10
    while True:
        found = _sessions(endpoint)
        if len(found) <= most or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_the_next_capture_reads_on_the_same_session_as_it_was(db: str) -> None:
    kind = get_kind("postgres")
    first = kind.capture(db)
    kept = _sessions(db)
    assert [state for _, state in kept] == ["idle"]  # one session, no transaction open
    second = kind.capture(db)
    assert _sessions(db) == kept  # read on that session, no new one
    # what the first read set in its transaction (TimeZone UTC, for the hash) was undone
    assert first.meta[TIMEZONE_META] == second.meta[TIMEZONE_META] == "Asia/Tokyo"
    assert first.state_hash == second.state_hash


def test_a_session_the_server_ended_is_replaced(db: str) -> None:
    kind = get_kind("postgres")
    before = kind.capture(db)
    ((pid, _),) = _sessions(db)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    after = kind.capture(db)
    assert after.state_hash == before.state_hash
    (now,) = _settled(db, 1)
    assert now[0] != pid


def _opener(endpoint: str) -> Any:
    return lambda: psycopg.connect(endpoint, autocommit=True)


def test_at_most_idle_max_are_kept_none_longer_than_idle_s(db: str) -> None:
    now = [0.0]
    readers = pgreaders.Readers(clock=lambda: now[0])
    key = _Endpoint.parse(db).conninfo()
    with (
        readers.connection(key, _opener(db)) as a,
        readers.connection(key, _opener(db)) as b,
        readers.connection(key, _opener(db)) as c,
    ):
        pids = {a.info.backend_pid, b.info.backend_pid, c.info.backend_pid}
        assert readers.pids() == pids  # in use: the capture's own sessions
    assert len(readers.pids()) == pgreaders.IDLE_MAX == 2
    assert len(_settled(db, 2)) == 2  # the third was closed
    with readers.connection(key, _opener(db)) as again:
        assert again.info.backend_pid in pids
    now[0] += pgreaders.IDLE_S + 1
    with readers.connection(key, _opener(db)) as fresh:
        assert fresh.info.backend_pid not in pids  # the kept ones had sat idle too long
    assert [p for p, _ in _settled(db, 1)] == [fresh.info.backend_pid]
    readers.close()
    assert _settled(db, 0) == []


def test_a_connection_left_in_a_transaction_is_not_kept(db: str) -> None:
    readers = pgreaders.Readers()
    key = _Endpoint.parse(db).conninfo()
    with readers.connection(key, _opener(db)) as conn:
        conn.autocommit = False
        conn.execute("SELECT 1")  # a transaction is open
    assert readers.pids() == set() and _settled(db, 0) == []


def test_a_forked_child_opens_its_own(db: str) -> None:
    readers = pgreaders.Readers()
    key = _Endpoint.parse(db).conninfo()
    with readers.connection(key, _opener(db)) as conn:
        parent = conn.info.backend_pid
    pid = os.fork()
    if pid == 0:  # the child: a session of its own, the parent's left alone
        code = 1
        try:
            with readers.connection(key, _opener(db)) as mine:
                code = 0 if mine.info.backend_pid != parent else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with readers.connection(key, _opener(db)) as conn:
        assert conn.info.backend_pid == parent  # still the parent's, still answering
    readers.close()
