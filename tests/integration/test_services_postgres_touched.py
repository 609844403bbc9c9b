"""Touched-state capture (``sandbox capture --state touched``) against real Postgres
containers: only the rows of the tables a run read or wrote (and of those their foreign keys
reference) are stored, with the schema of every table; the replay reproduces; a replayed
agent that reads a table whose rows were not captured is inconclusive, with that reason."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from test_services_containers import create_database, postgres_server, sessions_ended

from cli.main import main
from sandbox.services import get_kind
from sandbox.services.postgres import PostgresKind, pg_tool, unpack_dump
from sandbox.services.postgres.pgtouched import FLUSH_IDLE_S, NOTE_META, ROWS_META, STATE_META
from sandbox.services.statecapture import begin_service_capture, capture_end_state
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers,
                     item text NOT NULL);
CREATE TABLE cart (id serial PRIMARY KEY, item text NOT NULL);
CREATE TABLE products (sku text PRIMARY KEY, price numeric NOT NULL);
CREATE TABLE archive (id int PRIMARY KEY, body text);
INSERT INTO customers VALUES (1, 'ada'), (2, 'bob');
INSERT INTO orders VALUES (10, 1, 'apple'), (11, 2, 'pear');
INSERT INTO cart (item) VALUES ('kept');
INSERT INTO products VALUES ('apple', 1.5), ('pear', 2.0);
INSERT INTO archive SELECT g, repeat('x', 50) FROM generate_series(1, 500) g;
"""
ALL = {f"public.{t}" for t in ("customers", "orders", "cart", "products", "archive")}

SYNC = textwrap.dedent(
    """
    import os, psycopg
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        items = [r[0] for r in conn.execute("SELECT item FROM orders ORDER BY id")]
        for item in items + items[:1]:  # the bug: the first order is copied twice
            conn.execute("INSERT INTO cart (item) VALUES (%s)", (item,))
    """
)
PRICES = 'conn.execute("SELECT count(*) FROM products").fetchone()\n'
DUPLICATES = "sql:postgres=SELECT item FROM cart GROUP BY item HAVING count(*) > 1"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def shop(server: str) -> str:
    url = create_database(server, "shop")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
    sessions_ended(server, "shop")  # the setup's own counters are flushed (not the run's)
    return url


def _data_entries(data: bytes) -> set[str]:
    """The tables a captured dump holds rows of (its ``TABLE DATA`` entries) and every
    table it defines, from ``pg_restore --list``."""
    _, dump = unpack_dump(data)
    listing = subprocess.run(
        [*pg_tool("pg_restore"), "--list"], input=dump, capture_output=True, check=True
    ).stdout.decode()
    out = set()
    for line in listing.splitlines():
        if line.startswith(";"):
            continue
        if " TABLE DATA public " in line:
            out.add("data:public." + line.split(" TABLE DATA public ")[1].split()[0])
        elif " TABLE public " in line:
            out.add("table:public." + line.split(" TABLE public ")[1].split()[0])
    return out


def test_touched_capture_stores_the_rows_of_the_tables_the_run_reached_and_replays(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run reads ``orders`` and writes ``cart``: the dump holds the rows of those two and
    of ``customers`` (which ``orders`` references), the schema of all five; its replay
    reproduces; the agent changed to read ``products`` replays as inconclusive."""
    program = tmp_path / "sync.py"
    program.write_text(SYNC)
    store = DirectoryStore(tmp_path / "store")
    monkeypatch.setenv("DATABASE_URL", shop)
    monkeypatch.setenv("COLUMNS", "300")  # one reason, one line
    code = main(
        [
            *("capture", "--name", "sync", "--store", str(store.root), "--state", "touched"),
            *("--fail-if", DUPLICATES, "--", sys.executable, str(program)),
        ]
    )
    assert code == 0
    (manifest,) = store.list()
    assert manifest.failure is not None and manifest.failure.observed
    (service,) = manifest.services
    assert service.meta[STATE_META] == "touched"
    assert service.meta[ROWS_META] == ["public.cart", "public.customers", "public.orders"]
    assert service.before is not None and service.after is not None
    before = store.get_blob(service.before.sha256)
    entries = _data_entries(before)
    assert {e for e in entries if e.startswith("table:")} == {f"table:{t}" for t in ALL}
    assert {e for e in entries if e.startswith("data:")} == {
        "data:public.cart",
        "data:public.customers",
        "data:public.orders",
    }
    kind = get_kind("postgres")
    described = kind.describe_data(shop, before)
    tables = described["tables"]
    assert isinstance(tables, dict)
    assert tables["cart"] == [{"id": 1, "item": "kept"}], "the rows as they were before the run"
    assert tables["products"] == [] and tables["archive"] == []
    sequences = described["sequences"]
    assert isinstance(sequences, dict)
    assert sequences["cart_id_seq"] == {"last_value": 1, "is_called": True}, "before the run"
    capsys.readouterr()

    assert main(["show", manifest.run_id, "--store", str(store.root)]) == 0
    shown = capsys.readouterr().out
    assert "partial: rows of 3 of 5 tables" in shown

    monkeypatch.delenv("DATABASE_URL")  # the replay points it at its own container
    assert main(["replay", manifest.run_id, "--times", "2", "--store", str(store.root)]) == 1
    out = capsys.readouterr().out
    assert "failure reproduced: 2/2 runs" in out

    program.write_text(SYNC.replace("    items = ", "    " + PRICES + "    items = "))
    assert main(["replay", manifest.run_id, "--store", str(store.root)]) == 2
    out = capsys.readouterr().out
    assert "read table public.products, whose rows were not captured" in out


def test_a_session_left_open_is_waited_for_until_its_counters_are_flushed(shop: str) -> None:
    """A client that stays connected after two quick reads (the second one's counters are
    held back until it has been idle a while): the pin waits, and counts its table."""
    kind = PostgresKind()
    pinned = kind.pin(shop)
    with psycopg.connect(shop, autocommit=True) as agent:
        agent.execute("SELECT count(*) FROM archive").fetchone()
        agent.execute("SELECT count(*) FROM products").fetchone()
        started = time.monotonic()
        before, after = pinned.finish()
        waited = time.monotonic() - started
    assert "public.products" in before.meta[ROWS_META]  # type: ignore[operator]
    assert before.meta[ROWS_META] == after.meta[ROWS_META]
    assert waited >= FLUSH_IDLE_S - 1


def test_a_touched_capture_is_masked_and_outlives_an_idle_transaction_timeout(
    shop: str, server: str, tmp_path: Path
) -> None:
    """Masking rules apply to the captured rows (the meta still says which were kept), and
    the pinned transaction survives the server's idle-in-transaction timeout."""
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute("ALTER DATABASE shop SET idle_in_transaction_session_timeout = '1s'")
    store = DirectoryStore(tmp_path / "store")
    service, pinned = begin_service_capture("postgres", "db", shop, store, state="touched")
    assert pinned is not None
    with psycopg.connect(shop, autocommit=True) as agent:
        agent.execute("SELECT name FROM customers").fetchall()
    time.sleep(2)
    done = capture_end_state(
        service, shop, store, mask={"customers.name": "hash"}, key=b"k" * 32, pinned=pinned
    )
    assert done.meta[ROWS_META] == ["public.customers"]
    assert done.meta["masked"] == ["customers.name"]
    assert done.before is not None
    tables = PostgresKind().describe_data(shop, store.get_blob(done.before.sha256))["tables"]
    assert isinstance(tables, dict)
    names = [row["name"] for row in tables["customers"]]  # type: ignore[index,union-attr]
    assert len(names) == 2 and all(str(n).startswith("mask_") for n in names)
    assert tables["orders"] == []


def test_statistics_off_captures_the_whole_state_with_a_note(shop: str, server: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute("ALTER DATABASE shop SET track_counts = off")
    pinned = PostgresKind().pin(shop)
    before, _after = pinned.finish()
    assert STATE_META not in before.meta
    assert "track_counts" in str(before.meta[NOTE_META])
    assert before.state_hash == PostgresKind().capture(shop).state_hash
