"""State in production (``keep="failed"``) against a real Postgres container: concurrent runs
share one pinned snapshot (at most a couple of extra server connections, whatever their
number), a run that ends well dumps nothing, and a failed run sharing the pin keeps the state
as of that pin, which its replay restores and reproduces on."""

from __future__ import annotations

import importlib
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from test_services_containers import create_database, postgres_server, sessions_ended

from cli.main import main
from sandbox import capture
from sandbox.services.postgres import PINS
from sandbox.services.postgres.pgreaders import IDLE_MAX, READERS
from sandbox.services.postgres.pgtouched import PINNED_AT_META, ROWS_META, STATE_META
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

RUNS = 10
SCHEMA = """
CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL);
CREATE TABLE cart (id serial PRIMARY KEY, item text NOT NULL);
CREATE TABLE archive (id int PRIMARY KEY, body text);
INSERT INTO orders VALUES (10, 'apple'), (11, 'pear');
INSERT INTO cart (item) VALUES ('kept');
INSERT INTO archive SELECT g, repeat('x', 50) FROM generate_series(1, 500) g;
"""

AGENT = """
import os, threading
import psycopg
from sandbox import capture

BARRIER: threading.Barrier | None = None
PIDS: list[int] = []


def _wait(conn):
    PIDS.append(conn.info.backend_pid)
    barrier = BARRIER  # read once: the test lets go of it between the two waits
    if barrier is not None:
        barrier.wait(timeout=60)  # every run is inside its block
        barrier.wait(timeout=60)  # the sessions are counted


@capture.run("look", store={store!r}, keep="failed")
def look():
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("SELECT count(*) FROM orders").fetchone()
        _wait(conn)


@capture.run("sync", store={store!r}, keep="failed")
def sync():
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        items = [r[0] for r in conn.execute("SELECT item FROM orders ORDER BY id")]
        _wait(conn)
        for item in items + items[:1]:  # the bug: the first order is copied twice
            conn.execute("INSERT INTO cart (item) VALUES (%s)", (item,))
        dup = conn.execute("SELECT item FROM cart GROUP BY item HAVING count(*) > 1").fetchall()
        if dup:
            raise AssertionError(f"copied twice: {{dup}}")
"""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def shop(server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    url = create_database(server, "shop")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
    monkeypatch.setenv("DATABASE_URL", url)
    sessions_ended(server, "shop")  # the setup's own counters are flushed (not the run's)
    return url


def _agent(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    (tmp_path / "shopagent.py").write_text(textwrap.dedent(AGENT.format(store=str(store))))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("shopagent", None)
    return importlib.import_module("shopagent")


def _others(url: str, pids: list[int]) -> list[tuple[int, str]]:
    """The sessions on the database besides the agents' and this one: the capture's."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, coalesce(state, '') FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid() AND pid <> ALL(%s)",
            (pids,),
        ).fetchall()
    return [(int(p), str(s)) for p, s in rows]


def _settled(url: str, within: float = 10.0) -> list[tuple[int, str]]:
    """The capture's sessions once closed ones have left (a backend leaves
    ``pg_stat_activity`` a moment after its client closed the connection), but for those
    it keeps open for its next reads (:mod:`sandbox.services.postgres.pgreaders`)."""
    deadline = time.monotonic() + within
    seen = _others(url, [])
    while {p for p, _ in seen} - READERS.pids() and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = _others(url, [])
    return seen


def _only_kept_sessions_left(url: str) -> None:
    """Left on the server by the capture: no transaction, and no session but the at most
    ``IDLE_MAX`` it keeps open (idle) for its next reads."""
    left = _settled(url)
    assert 1 <= len(left) <= IDLE_MAX and {p for p, _ in left} == READERS.pids(), left
    assert {state for _, state in left} == {"idle"}, left


def _run_together(agent: ModuleType, url: str, bad: int | None) -> list[tuple[int, str]]:
    """``RUNS`` runs at once (run ``bad`` is the failing sync); the capture's sessions seen
    while every run is inside its block."""
    agent.BARRIER = threading.Barrier(RUNS + 1)
    agent.PIDS.clear()
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            (agent.sync if i == bad else agent.look)()
        except AssertionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(RUNS)]
    for t in threads:
        t.start()
    barrier = agent.BARRIER
    barrier.wait(timeout=60)
    seen = _others(url, list(agent.PIDS))
    agent.BARRIER = None
    barrier.wait(timeout=60)
    for t in threads:
        t.join(timeout=120)
    assert (len(errors) == 1) == (bad is not None)
    return seen


def test_concurrent_runs_share_one_pin_and_runs_that_end_well_dump_nothing(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    agent = _agent(tmp_path, store, monkeypatch)
    seen = _run_together(agent, shop, bad=None)
    assert len(agent.PIDS) == RUNS
    assert 1 <= len(seen) <= 2, seen  # the shared pin (one transaction), not one per run
    capture.flush()  # the kept runs are written in the background
    assert DirectoryStore(store).list() == []
    assert list(DirectoryStore(store).iter_blobs()) == []
    assert PINS.open_count() == 0
    _only_kept_sessions_left(shop)


def test_a_failed_run_sharing_the_pin_keeps_that_state_and_its_replay_reproduces(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    agent = _agent(tmp_path, store, monkeypatch)
    seen = _run_together(agent, shop, bad=3)
    assert 1 <= len(seen) <= 2, seen
    capture.flush()  # the kept runs are written in the background
    (manifest,) = DirectoryStore(store).list()
    assert manifest.name == "sync" and manifest.failure is not None
    (service,) = manifest.services
    assert service.meta[STATE_META] == "touched"
    assert "public.archive" not in service.meta[ROWS_META]
    assert {"public.orders", "public.cart"} <= set(service.meta[ROWS_META])
    assert PINNED_AT_META in service.meta
    assert PINS.open_count() == 0
    _only_kept_sessions_left(shop)
    with psycopg.connect(shop, autocommit=True) as conn:  # the live database is fixed now
        conn.execute("TRUNCATE cart")
    code = main(["replay", manifest.run_id, "--times", "2", "--store", str(store)])
    assert code == 1  # reproduced: the cart as of the pin held 'kept', and the copy doubled
