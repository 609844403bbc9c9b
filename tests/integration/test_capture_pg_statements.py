"""A Postgres service captured with ``keep="failed"`` against a real container: the tables a
kept run touched are told from its own statements (views, triggers followed; dynamic SQL
falls back to the statistics counters, saying why), the pinned snapshot holds no lock the
application's ``TRUNCATE`` or DDL would wait for, and a kept run whose state capture fails
in the background is marked damaged with one warning."""

from __future__ import annotations

import asyncio
import importlib
import io
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg
import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from cli.main import main
from sandbox import capture
from sandbox.capture import finisher
from sandbox.services.pinshare import WINDOW_ENV
from sandbox.services.postgres import PINS
from sandbox.services.postgres import kind as postgres_kind
from sandbox.services.postgres.pgtouched import (
    ROWS_META,
    STATE_META,
    STATEMENTS_NOTE_META,
    TOLD_META,
    WAIT_ENV,
)
from sandbox.services.registry import get_kind
from sandbox.snapshot.manifest import Manifest, ServiceState
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers,
                     item text NOT NULL);
CREATE TABLE refunds (id serial PRIMARY KEY, order_id int NOT NULL, cents int NOT NULL);
CREATE TABLE audit (id serial PRIMARY KEY, note text NOT NULL);
CREATE TABLE archive (id int PRIMARY KEY, body text);
INSERT INTO customers VALUES (1, 'ada');
INSERT INTO orders VALUES (10, 1, 'apple');
INSERT INTO archive SELECT g, 'x' FROM generate_series(1, 50) g;
CREATE VIEW open_orders AS SELECT o.id, o.item FROM orders o;
CREATE FUNCTION log_refund() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit (note) VALUES ('refund of order ' || NEW.order_id);
  RETURN NEW;
END $$;
CREATE TRIGGER refund_audit AFTER INSERT ON refunds FOR EACH ROW EXECUTE FUNCTION log_refund();
CREATE FUNCTION rows_of(t text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE 'SELECT count(*) FROM ' || quote_ident(t) INTO n;
  RETURN n;
END $$;
"""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def shop(server: str) -> str:
    url = create_database(server, "shop")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
    return url


@pytest.fixture
def fresh_end_states(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One entry for each end state captured afresh (not shared with other runs)."""
    captured: list[str] = []
    real = postgres_kind._capture

    def counted(*args: Any, **kwargs: Any) -> Any:
        captured.append("end state")
        return real(*args, **kwargs)

    monkeypatch.setattr(postgres_kind, "_capture", counted)
    return captured


def _kept(store: DirectoryStore) -> Manifest:
    assert capture.flush(120), "the kept run was not written in time"
    (manifest,) = store.list()
    return manifest


def _found(store: DirectoryStore, client: str) -> ServiceState:
    """The Postgres service of the one kept run, ``refund``, which found the database
    itself (none declared) through ``client``."""
    manifest = _kept(store)
    assert manifest.name == "refund"
    (service,) = manifest.services
    assert service.kind == "postgres"
    (touched,) = manifest.touched
    assert touched.clients == [client] and touched.service == service.name
    return service


def _told(service: ServiceState, *tables: str) -> None:
    """The kept run's tables were told from its statements: exactly ``tables`` (public)."""
    assert service.meta[TOLD_META] == "statements"
    assert set(service.meta[ROWS_META]) == {f"public.{t}" for t in tables}


def _run(shop: str, store: DirectoryStore, *statements: str) -> None:
    spec = capture.ServiceSpec("db", "postgres", shop, env="DATABASE_URL")
    with capture.run("refund", store=store, services=[spec], keep="failed"):
        with psycopg.connect(shop, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)
        capture.mark_failed("paid twice")


def test_a_kept_run_keeps_the_tables_its_statements_reach_through_views_and_triggers(
    shop: str, tmp_path: Path
) -> None:
    store = DirectoryStore(tmp_path / "store")
    _run(
        shop,
        store,
        "SELECT id, item FROM open_orders",  # a view over orders (which references customers)
        "INSERT INTO refunds (order_id, cents) VALUES (10, 100)",  # its trigger writes audit
    )
    (service,) = _kept(store).services
    assert service.meta[STATE_META] == "touched"
    _told(service, "orders", "customers", "refunds", "audit")
    assert PINS.open_count() == 0


def test_dynamic_sql_falls_back_to_the_counters_and_says_why(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WAIT_ENV, "0")  # the counters are not waited for: the whole state
    store = DirectoryStore(tmp_path / "store")
    _run(shop, store, "SELECT rows_of('archive')")
    (service,) = _kept(store).services
    assert service.meta[TOLD_META] == "counters"
    note = service.meta[STATEMENTS_NOTE_META]
    assert "public.rows_of" in note and "built at run time" in note


def test_the_pin_holds_no_lock_that_truncate_or_ddl_waits_for(shop: str, tmp_path: Path) -> None:
    """Two runs share a pin; one is kept and dumped while the other still holds the pin:
    the application's ``TRUNCATE ... RESTART IDENTITY`` and ``ALTER TABLE`` go through."""
    store = DirectoryStore(tmp_path / "store")
    spec = capture.ServiceSpec("db", "postgres", shop, env="DATABASE_URL")
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with capture.run("look", store=store, services=[spec], keep="failed"):
            with psycopg.connect(shop, autocommit=True) as conn:
                conn.execute("SELECT count(*) FROM refunds").fetchone()
            inside.set()
            leave.wait(60)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert inside.wait(60)
        _run(shop, store, "INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
        assert capture.flush(120)
        assert PINS.open_count() == 1  # still held by the run in the thread
        with psycopg.connect(shop, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '3s'")
            conn.execute("TRUNCATE refunds, audit RESTART IDENTITY")
            conn.execute("ALTER TABLE archive ADD COLUMN kept boolean")
    finally:
        leave.set()
        thread.join(60)
    (manifest,) = store.list()
    assert manifest.name == "refund"
    assert PINS.open_count() == 0


def test_a_state_capture_that_fails_in_the_background_damages_the_run_with_one_warning(
    shop: str, server: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = DirectoryStore(tmp_path / "store")
    held = threading.Event()
    finisher.submit(lambda: held.wait(60))  # the background thread is busy: the run queues
    try:
        _run(shop, store, "INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
        assert store.list() == []  # the block returned; its run is not written yet
        create_database(server, "shop")  # the database (and the pin's session) are gone
    finally:
        held.set()
    assert capture.flush(120)
    (manifest,) = store.list()
    assert manifest.status == "damaged"
    warnings = [line for line in capfd.readouterr().err.splitlines() if "capture of run" in line]
    assert len(warnings) == 1 and manifest.run_id in warnings[0]
    assert PINS.open_count() == 0


def test_runs_kept_one_after_another_are_finished_together_with_one_end_state_dump(
    shop: str, tmp_path: Path, fresh_end_states: list[str]
) -> None:
    """Three runs kept one after another within the finisher's gathering delay are
    finished as one batch: the state after them is captured once, after the last one
    ended, and each keeps it."""
    store = DirectoryStore(tmp_path / "store")
    for order in (10, 11, 12):
        _run(shop, store, f"INSERT INTO refunds (order_id, cents) VALUES ({order}, 100)")
        # each run ends after the one before it was handed to the finisher, the three
        # within its gathering delay
        time.sleep(finisher.GATHER_S * 0.3)
    assert capture.flush(120)
    kept = store.list()
    assert len(kept) == 3 and all(m.status == "complete" for m in kept)
    assert fresh_end_states == ["end state"]
    ends = {m.services[0].after for m in kept}
    assert len(ends) == 1 and None not in ends
    assert PINS.open_count() == 0


def test_a_kept_runs_end_state_is_a_later_pins_state_dumped_once_for_both(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_end_states: list[str]
) -> None:
    """A run kept while a later run holds a pin taken after it ended: its end state is that
    pin's state (its own write in it, the later run's not), and the later run, kept too,
    has the very same dump as its state before. Only the last run's end state is captured
    afresh (before, the first run's was too)."""
    monkeypatch.setenv(WINDOW_ENV, "0.2")
    store = DirectoryStore(tmp_path / "store")
    spec = capture.ServiceSpec("db", "postgres", shop, env="DATABASE_URL")
    _run(shop, store, "INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    time.sleep(0.3)  # past the window: the next run's pin is its own, taken after
    with capture.run("later", store=store, services=[spec], keep="failed"):
        with psycopg.connect(shop, autocommit=True) as conn:
            conn.execute("INSERT INTO refunds (order_id, cents) VALUES (11, 100)")
        deadline = time.monotonic() + 60
        while not store.list() and time.monotonic() < deadline:
            time.sleep(0.05)  # the first run is finished while this one holds its pin
        assert [m.name for m in store.list()] == ["refund"]
        capture.mark_failed("paid twice")
    assert capture.flush(120)
    by_name = {m.name: m.services[0] for m in store.list()}
    first, later = by_name["refund"], by_name["later"]
    assert first.after is not None and later.before is not None
    assert first.after.sha256 == later.before.sha256
    assert first.hash_after == later.hash_before
    assert fresh_end_states == ["end state"]  # the later run's
    described = get_kind("postgres").describe_data(shop, store.get_blob(first.after.sha256))
    tables = described["tables"]
    assert isinstance(tables, dict)
    refunds = tables["refunds"]
    assert isinstance(refunds, list)
    assert [row["order_id"] for row in refunds if isinstance(row, dict)] == [10]
    assert PINS.open_count() == 0


def test_a_connection_opened_before_the_runs_is_seen_by_each_run_that_sends_through_it(
    shop: str, tmp_path: Path
) -> None:
    """A connection opened outside any run (as an engine's pool keeps one for the runs
    after it) and used by two runs, none declaring the database: the kept one finds it at
    its first statement and captures the tables its statements reach."""
    store = DirectoryStore(tmp_path / "store")
    conn = psycopg.connect(shop, autocommit=True)
    try:
        with capture.run("look", store=store, keep="failed"):
            conn.execute("SELECT count(*) FROM customers").fetchone()
        with capture.run("refund", store=store, keep="failed"):
            conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
            capture.mark_failed("paid twice")
    finally:
        conn.close()
    service = _found(store, "psycopg")
    _told(service, "refunds", "audit")
    assert PINS.open_count() == 0


def test_a_psycopg2_connection_opened_in_one_run_is_seen_by_the_next_at_its_first_statement(
    shop: str, tmp_path: Path
) -> None:
    """A psycopg2 connection opened inside a first run and kept for the next (as a web
    framework keeps its connection between requests): the second run, kept, finds the
    database at its first statement, through the connection's cursor class, and its
    statement tells its tables (the trigger's followed)."""
    import psycopg2

    store = DirectoryStore(tmp_path / "store")
    conn: Any = None
    try:
        with capture.run("look", store=store, keep="failed"):
            conn = psycopg2.connect(shop)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM customers")
        with capture.run("refund", store=store, keep="failed"), conn.cursor() as cur:
            cur.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
            capture.mark_failed("paid twice")
    finally:
        if conn is not None:
            conn.close()
    service = _found(store, "psycopg2")
    _told(service, "refunds", "audit")
    assert PINS.open_count() == 0


def test_an_asyncpg_connection_opened_before_the_run_is_seen_at_its_first_query(
    shop: str, tmp_path: Path
) -> None:
    """An asyncpg connection opened outside the run (as a pool's is): the kept run finds
    the database at its first statement, and its statements (one without arguments, one
    prepared, a ``COPY``) tell its tables, the trigger's followed: no wait for the
    server's counters, which a busy service never flushes in time."""
    store = DirectoryStore(tmp_path / "store")

    async def serve() -> None:
        conn = await asyncpg.connect(shop)
        try:
            async with capture.run("refund", store=store, keep="failed"):
                await conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
                await conn.fetchrow("SELECT item FROM open_orders WHERE id = $1", 10)
                await conn.copy_to_table("archive", source=_rows(), format="csv")
                capture.mark_failed("paid twice")
        finally:
            await conn.close()

    asyncio.run(serve())
    service = _found(store, "asyncpg")
    _told(service, "refunds", "audit", "orders", "customers", "archive")


async def _rows() -> AsyncIterator[bytes]:
    yield b"900,copied\n"


def test_every_psycopg2_statement_tells_a_kept_runs_tables(shop: str, tmp_path: Path) -> None:
    """A psycopg2 connection opened in the run: a cursor of a class the call names
    (``RealDictCursor``, still making its dict rows), a ``psycopg2.sql`` statement, a
    ``copy_expert`` and a ``copy_from``: each statement's tables are told, none missed."""
    import psycopg2
    import psycopg2.extras
    from psycopg2 import sql

    store = DirectoryStore(tmp_path / "store")
    with capture.run("refund", store=store, keep="failed"):
        conn = psycopg2.connect(shop)
        try:
            with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
                cur.execute("SELECT item FROM open_orders WHERE id = %s", (10,))
                assert cur.fetchone() == {"item": "apple"}
            with conn.cursor() as cur:
                cur.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("refunds")))
                cur.copy_expert("COPY archive TO STDOUT", io.StringIO())
                cur.copy_from(io.StringIO("1\tnote\n"), "audit", columns=("id", "note"))
            conn.commit()
        finally:
            conn.close()
        capture.mark_failed("paid twice")
    service = _found(store, "psycopg2")
    _told(service, "orders", "customers", "refunds", "audit", "archive")


def test_a_psycopg2_connection_choosing_its_own_cursors_keeps_them_and_falls_back_to_counters(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LoggingConnection`` makes its own cursor class, unwatched: it keeps making it (its
    statements still logged), and the kept run's tables are told by the counters, naming
    psycopg2, never from statements some of which were not seen."""
    import psycopg2
    import psycopg2.extras

    monkeypatch.setenv(WAIT_ENV, "0")  # the counters are not waited for: the whole state
    store = DirectoryStore(tmp_path / "store")
    logged = io.StringIO()
    with capture.run("refund", store=store, keep="failed"):
        conn = psycopg2.connect(shop, connection_factory=psycopg2.extras.LoggingConnection)
        try:
            conn.initialize(logged)
            with conn.cursor() as cur:
                assert isinstance(cur, psycopg2.extras.LoggingCursor)
                cur.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
            conn.commit()
        finally:
            conn.close()
        capture.mark_failed("paid twice")
    assert "INSERT INTO refunds" in logged.getvalue()
    service = _found(store, "psycopg2")
    assert service.meta[TOLD_META] == "counters"
    assert "psycopg2" in service.meta[STATEMENTS_NOTE_META]


def test_a_psycopg2_engines_pooled_connection_is_seen_by_the_run_that_checks_it_out(
    shop: str, tmp_path: Path
) -> None:
    """A SQLAlchemy engine over psycopg2 made before the runs: its pool's connection,
    opened in one run, is checked out again by the next, which is kept, captures the
    database, and tells its tables from its statements."""
    import sqlalchemy

    store = DirectoryStore(tmp_path / "store")
    engine = sqlalchemy.create_engine(shop.replace("postgresql://", "postgresql+psycopg2://"))
    try:
        with capture.run("look", store=store, keep="failed"), engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT count(*) FROM customers"))
        with capture.run("refund", store=store, keep="failed"):
            with engine.begin() as conn:
                conn.execute(sqlalchemy.text("INSERT INTO refunds (order_id, cents) VALUES (1, 2)"))
            capture.mark_failed("paid twice")
        assert engine.pool.checkedin() == 1  # one connection, opened by the first run
    finally:
        engine.dispose()
    service = _found(store, "psycopg2")
    _told(service, "refunds", "audit")


def _import_agent(
    name: str,
    source: str,
    store: DirectoryStore,
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> ModuleType:
    """The agent module ``source`` written as ``name`` and imported (``SHOP_URL``: the
    database), as a service imports its own."""
    (tmp_path / f"{name}.py").write_text(source.format(store=str(store.root)))
    monkeypatch.setenv("SHOP_URL", shop)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def _replay_kept(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, str]:
    """``sandbox replay`` of the one kept run, in this process: its exit code and output."""
    manifest = _kept(store)
    capsys.readouterr()
    code = main(["replay", manifest.run_id, *options, "--store", str(store.root)])
    return code, capsys.readouterr().out


def _refunds(shop: str) -> int:
    with psycopg.connect(shop, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM refunds").fetchone()
    assert row is not None
    return int(row[0])


AGENT = """
import os
import psycopg
from sandbox import capture

CONN = psycopg.connect(os.environ["SHOP_URL"], autocommit=True)  # opened at import


@capture.run("refund", store={store!r}, keep="failed")
def refund():
    CONN.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    capture.mark_failed("paid twice")
"""


AGENT_PSYCOPG2 = """
import os
import psycopg2
from sandbox import capture

CONN = psycopg2.connect(os.environ["SHOP_URL"])  # opened at import
CONN.autocommit = True


@capture.run("refund", store={store!r}, keep="failed")
def refund():
    with CONN.cursor() as cur:
        cur.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    capture.mark_failed("paid twice")
"""


@pytest.mark.parametrize(
    ("name", "source"),
    [("refundagent", AGENT), ("refundagent2", AGENT_PSYCOPG2)],
    ids=["psycopg", "psycopg2"],
)
def test_a_connection_opened_before_the_replay_is_refused_and_the_live_database_untouched(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    source: str,
) -> None:
    """The agent's connection was opened when its module was imported, before the replay
    began: its statement would go to the recorded (live) database. It is refused, the run
    is inconclusive, and the live database keeps only the capture's row."""
    monkeypatch.setenv("COLUMNS", "300")  # one reason, one line
    store = DirectoryStore(tmp_path / "store")
    agent = _import_agent(name, source, store, shop, tmp_path, monkeypatch)
    try:
        agent.refund()
        code, out = _replay_kept(store, capsys)
    finally:
        agent.CONN.close()
    assert code == 2, out
    assert "opened before the replay began" in out
    assert _refunds(shop) == 1  # the capture's insert only


ENGINE_AGENT = """
import os
import sqlalchemy
from sandbox import capture

ENGINE = sqlalchemy.create_engine(
    os.environ["SHOP_URL"].replace("postgresql://", "postgresql+psycopg://")
)  # made at import, its pool kept between requests


@capture.run("refund", store={store!r}, keep="failed")
def refund():
    with ENGINE.begin() as conn:
        conn.execute(sqlalchemy.text("INSERT INTO refunds (order_id, cents) VALUES (10, 100)"))
        paid = conn.execute(sqlalchemy.text("SELECT count(*) FROM refunds")).scalar_one()
    if paid > 1:
        capture.mark_failed(f"paid {{paid}} times")
"""


def test_an_engine_made_at_import_replays_in_every_run_against_the_sandbox(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A SQLAlchemy engine made at import whose pool holds the capture's connection (to the
    live database) and, from the second run on, connections the reset between runs ended:
    each run starts with a new pool, routed to the sandbox. The failure reproduces in both
    runs; the live database keeps the capture's rows only."""
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    store = DirectoryStore(tmp_path / "store")
    agent = _import_agent("engineagent", ENGINE_AGENT, store, shop, tmp_path, monkeypatch)
    try:
        agent.refund()
        code, out = _replay_kept(store, capsys, "--times", "2")
    finally:
        agent.ENGINE.dispose()
    assert code == 1, out
    assert "failure reproduced: 2/2 runs" in out
    assert _refunds(shop) == 2  # the row before and the capture's insert


IMPORT_WRITER = """
import os
import psycopg
from sandbox import capture

CONN = psycopg.connect(os.environ["SHOP_URL"], autocommit=True)
CONN.execute("INSERT INTO audit (note) VALUES ('started')")  # a write as it is imported


@capture.run("refund", store={store!r}, keep="failed")
def refund():
    CONN.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    started = CONN.execute("SELECT count(*) FROM audit WHERE note = 'started'").fetchone()[0]
    capture.mark_failed(f"started {{started}} times")
"""


def test_a_module_that_writes_as_it_is_imported_writes_to_the_sandbox_not_the_live_database(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The replay imports the entrypoint's module before its runs, when the sandbox is not
    up yet: the module's connection and its write at import are refused there, and the
    module is imported again inside the run, where both go to the sandbox. The failure
    reproduces; the live database keeps the capture's import's row only."""
    store = DirectoryStore(tmp_path / "store")
    agent = _import_agent("importwriter", IMPORT_WRITER, store, shop, tmp_path, monkeypatch)
    agent.refund()
    agent.CONN.close()
    del sys.modules["importwriter"]  # the replay imports it, as a new process would
    code, out = _replay_kept(store, capsys)
    assert code == 1, out
    assert "failure reproduced: 1/1 runs" in out
    with psycopg.connect(shop, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM audit WHERE note = 'started'").fetchone()
    assert row == (1,)  # the capture's import only
    assert _refunds(shop) == 1


CACHED_AGENT = """
import os
import psycopg
from sandbox import capture


@capture.tool
def cached_paid():
    return 0  # a stale cache: not paid yet


@capture.run("refund", store={store!r}, keep="failed")
def refund():
    with psycopg.connect(os.environ["SHOP_URL"], autocommit=True) as conn:
{body}
        paid = conn.execute("SELECT count(*) FROM refunds").fetchone()[0]
    if paid > 1:
        capture.mark_failed(f"paid {{paid}} times")
"""
BUG = """\
        if cached_paid() == 0:
            conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")"""
FIX = """\
        if conn.execute("SELECT count(*) FROM refunds").fetchone()[0] == 0:
            conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")"""
BROKEN_FIX = """\
        try:
            conn.execute("SELECT count(*) FROM refund_log")  # no such table
        except psycopg.Error:
            return"""


@pytest.mark.parametrize(
    ("fix", "code", "said"),
    [
        (
            FIX,
            0,
            "(0/1 recorded calls made; the restored state used: postgres read table public.refunds",
        ),
        (BROKEN_FIX, 2, "exercised nothing of the recorded run (0/1 recorded calls made)"),
    ],
    ids=["reads-the-database", "its-statement-fails"],
)
def test_a_fix_that_makes_no_recorded_call_is_gone_only_if_it_used_the_restored_tables(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fix: str,
    code: int,
    said: str,
) -> None:
    """The recorded run asked a stale cache (a recorded tool call) and paid twice. A fix
    that reads the database instead never makes that call: it read the restored table (the
    server's statistics counters say so), "gone". A fix whose only statement fails (caught
    by the agent) moved no table's counters, though its connection's own statements did
    run: it exercised nothing, inconclusive."""
    monkeypatch.setenv("COLUMNS", "300")
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    store = DirectoryStore(tmp_path / "store")
    source = CACHED_AGENT.replace("{body}", BUG)
    agent = _import_agent("cachedagent", source, store, shop, tmp_path, monkeypatch)
    agent.refund()
    (tmp_path / "cachedagent.py").write_text(
        CACHED_AGENT.replace("{body}", fix).format(store=str(store.root))
    )
    del sys.modules["cachedagent"]  # the fixed module is imported by the replay
    replayed, out = _replay_kept(store, capsys)
    assert replayed == code, out
    assert said in out


ASYNC_CACHED_AGENT = """
import os
import asyncpg
from sandbox import capture


@capture.tool
def cached_paid():
    return 0  # a stale cache: not paid yet


@capture.run("refund", store={store!r}, keep="failed")
async def refund():
    conn = await asyncpg.connect(os.environ["SHOP_URL"])
    try:
        if {check} == 0:
            await conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
        paid = await conn.fetchval("SELECT count(*) FROM refunds")
    finally:
        await conn.close()
    if paid > 1:
        capture.mark_failed(f"paid {{paid}} times")
"""


def test_an_async_fix_that_read_the_restored_table_through_asyncpg_is_gone(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As above, the agent an ``async def`` over asyncpg: the fix's queries read the
    restored table, and that exercised the run."""
    monkeypatch.setenv("COLUMNS", "300")
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    store = DirectoryStore(tmp_path / "store")
    source = ASYNC_CACHED_AGENT.replace("{check}", "cached_paid()")
    agent = _import_agent("asynccached", source, store, shop, tmp_path, monkeypatch)
    asyncio.run(agent.refund())
    fixed = ASYNC_CACHED_AGENT.replace(
        "{check}", 'await conn.fetchval("SELECT count(*) FROM refunds")'
    )
    (tmp_path / "asynccached.py").write_text(fixed.format(store=str(store.root)))
    del sys.modules["asynccached"]
    code, out = _replay_kept(store, capsys)
    assert code == 0, out
    assert (
        "(0/1 recorded calls made; the restored state used: postgres read table public.refunds"
        in out
    )


PSYCOPG2_AT_IMPORT = """
import os
import psycopg2
import psycopg2.extras
from sandbox import capture

DB = psycopg2.connect(os.environ["SHOP_URL"], cursor_factory=psycopg2.extras.RealDictCursor)
DB.autocommit = True
with DB.cursor() as cur:
    cur.execute("INSERT INTO audit (note) VALUES ('started')")  # a write as it is imported


@capture.run("refund", store={store!r}, keep="failed")
def refund():
    with DB.cursor() as cur:
        cur.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
        cur.execute("SELECT count(*) AS paid FROM refunds")
        paid = cur.fetchone()["paid"]  # its own cursor class still makes the rows
    if paid > 1:
        capture.mark_failed(f"paid {{paid}} times")
"""


def test_a_psycopg2_connection_opened_at_import_is_captured_and_replays_in_every_run(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """psycopg2's cursors are C: a connection opened at import, before any run, is seen at
    its first statement through its cursor class (a subclass of the one it was given). The
    kept run holds the database; its replay imports the module afresh in each run, where
    its connection and its write at import go to the sandbox: 2/2 reproduced, the live
    database keeps the capture's rows only."""
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (order_id, cents) VALUES (10, 100)")
    store = DirectoryStore(tmp_path / "store")
    agent = _import_agent("psycopg2agent", PSYCOPG2_AT_IMPORT, store, shop, tmp_path, monkeypatch)
    try:
        agent.refund()
    finally:
        agent.DB.close()
    _found(store, "psycopg2")
    del sys.modules["psycopg2agent"]  # the replay imports it, as a new process would
    code, out = _replay_kept(store, capsys, "--times", "2")
    assert code == 1, out
    assert "failure reproduced: 2/2 runs" in out
    assert _refunds(shop) == 2  # the row before and the capture's insert
    with psycopg.connect(shop, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM audit WHERE note = 'started'").fetchone()
    assert row == (1,)  # the capture's import only
