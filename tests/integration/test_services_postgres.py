"""The postgres service kind against real servers: rows, sequences, defaults, versions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from sandbox.errors import ServiceError, ServiceVersionError
from sandbox.services import get_kind
from sandbox.services.postgres import MAGIC, pack_dump, unpack_dump

pytestmark = pytest.mark.docker

SCHEMA = """
CREATE TABLE orders (
    id serial PRIMARY KEY,
    item text NOT NULL,
    qty integer NOT NULL DEFAULT 1 CHECK (qty > 0),
    meta jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_item ON orders (item);
CREATE TABLE notes (id bigint GENERATED ALWAYS AS IDENTITY, order_id int REFERENCES orders,
                    body text, tags text[]);
CREATE SEQUENCE invoice_no START 100;
CREATE VIEW big_orders AS SELECT id, item FROM orders WHERE qty > 2;
INSERT INTO orders (item, qty, meta, created_at)
    VALUES ('apple', 3, '{"b": 1, "a": [1, 2]}', '2024-03-01 12:00:00+00');
INSERT INTO orders (item, qty) VALUES ('pear', 1), ('plum', 5);
INSERT INTO notes (order_id, body, tags) VALUES (1, 'first', '{x,y}'), (2, NULL, NULL);
"""


def _rows(conn: psycopg.Connection[Any], table: str) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def shop(server: str) -> str:
    endpoint = create_database(server, "shop")
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute(SCHEMA)
        for _ in range(5):
            conn.execute("SELECT nextval('invoice_no')")  # now at 104
    return endpoint


def test_restore_keeps_rows_sequences_and_defaults(shop: str, server: str) -> None:
    kind = get_kind("postgres")
    with psycopg.connect(shop) as conn:
        before = {t: _rows(conn, t) for t in ("orders", "notes")}
    captured = kind.capture(shop)
    assert captured.version is not None and captured.version.startswith("15.")
    assert captured.data.startswith(MAGIC)

    with psycopg.connect(shop, autocommit=True) as conn:  # drop everything
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    kind.restore(shop, captured.data)

    with psycopg.connect(shop, autocommit=True) as conn:
        assert {t: _rows(conn, t) for t in ("orders", "notes")} == before
        assert conn.execute("SELECT nextval('invoice_no')").fetchone() == (105,)
        with conn.transaction():  # now() is the transaction's start time
            new = conn.execute("INSERT INTO orders (item) VALUES ('fig') RETURNING id, created_at")
            order_id, created_at = new.fetchone() or (None, None)
            now = conn.execute("SELECT now()").fetchone()
        assert order_id == 4, "the serial continues after the restored rows"
        assert now is not None and created_at == now[0], "the now() default survives"
        default = conn.execute(
            "SELECT column_default FROM information_schema.columns "
            "WHERE table_name = 'orders' AND column_name = 'created_at'"
        ).fetchone()
        assert default == ("now()",)
        assert conn.execute("SELECT count(*) FROM big_orders").fetchone() == (2,)
        note = conn.execute("INSERT INTO notes (body) VALUES ('n') RETURNING id").fetchone()
        assert note == (3,), "the identity column continues"


def test_restore_into_a_fresh_container(shop: str) -> None:
    kind = get_kind("postgres")
    captured = kind.capture(shop)
    with postgres_server() as other:
        target = f"{other}/shop"  # the database does not exist yet there
        kind.restore(target, captured.data)
        assert kind.state_hash(target) == captured.state_hash
        with psycopg.connect(shop) as a, psycopg.connect(target) as b:
            for table in ("orders", "notes"):
                assert _rows(a, table) == _rows(b, table)
            seq = "SELECT last_value, is_called FROM invoice_no"
            assert a.execute(seq).fetchone() == b.execute(seq).fetchone() == (104, True)


def test_hash_ignores_insertion_order(server: str) -> None:
    kind = get_kind("postgres")
    hashes = []
    for name, values in (
        ("order_a", "(1,'x'),(2,'y'),(3,'z')"),
        ("order_b", "(3,'z'),(1,'x'),(2,'y')"),
    ):
        endpoint = create_database(server, name)
        with psycopg.connect(endpoint, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int, v text)")
            conn.execute(f"INSERT INTO t VALUES {values}")
            conn.execute("UPDATE t SET v = v WHERE id = 1")  # moves the row on disk
        hashes.append(kind.state_hash(endpoint))
    assert hashes[0] == hashes[1]


def test_hash_sees_schema_and_sequence_changes(shop: str) -> None:
    kind = get_kind("postgres")
    original = kind.state_hash(shop)
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("ALTER TABLE orders ALTER COLUMN qty SET DEFAULT 2")
    assert kind.state_hash(shop) != original
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("ALTER TABLE orders ALTER COLUMN qty SET DEFAULT 1")
    assert kind.state_hash(shop) == original
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("SELECT nextval('invoice_no')")
    assert kind.state_hash(shop) != original


def test_dump_from_newer_major_version_is_refused(shop: str) -> None:
    kind = get_kind("postgres")
    captured = kind.capture(shop)
    header, dump = unpack_dump(captured.data)
    header["server_version"] = "99.1"
    with pytest.raises(ServiceVersionError) as err:
        kind.restore(shop, pack_dump(header, dump))
    message = str(err.value)
    assert "99.1" in message and f"runs {captured.version}" in message
    assert isinstance(err.value, ServiceError)
    assert kind.state_hash(shop) == captured.state_hash, "a refused restore leaves the db alone"


def test_reset_uses_a_template_that_refuses_connections(shop: str, server: str) -> None:
    kind = get_kind("postgres")
    with pytest.raises(ServiceError, match="mark_restore_point"):
        kind.reset(create_database(server, "never_marked"))
    original = kind.state_hash(shop)
    kind.mark_restore_point(shop)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"{server}/shop_sbx_rp").close()
    held = psycopg.connect(shop, autocommit=True)  # an agent still connected at reset time
    held.execute("DELETE FROM notes")
    kind.reset(shop)
    held.close()
    assert kind.state_hash(shop) == original


def test_bad_data_and_endpoints_are_clear_errors(shop: str, server: str) -> None:
    kind = get_kind("postgres")
    with pytest.raises(ServiceError, match="not a postgres capture"):
        kind.restore(shop, b"PGDMP garbage")
    header = json.dumps({"format_version": 7, "server_version": "15.1"}).encode()
    with pytest.raises(ServiceError, match="format version 7"):
        kind.restore(shop, MAGIC + header + b"\n")
    with pytest.raises(ServiceError, match="pg_restore failed"):
        kind.restore(shop, pack_dump({"format_version": 1, "server_version": "15.1"}, b"junk"))
    with pytest.raises(ServiceError, match="names no database"):
        kind.capture(server)
    with pytest.raises(ServiceError, match="cannot connect"):
        kind.capture(f"{server}/no_such_db")


def test_describe_rows_sequences_and_a_recorded_dump(shop: str, server: str) -> None:
    kind = get_kind("postgres")
    described = kind.describe(shop)
    tables = described["tables"]
    assert isinstance(tables, dict)
    orders = tables["orders"]
    assert isinstance(orders, list) and [r["id"] for r in orders] == [1, 2, 3]  # type: ignore[call-overload,index]
    assert orders[0] == {
        "id": 1,
        "item": "apple",
        "qty": 3,
        "meta": {"a": [1, 2], "b": 1},
        "created_at": "2024-03-01T12:00:00+00:00",
    }
    assert tables["notes"] == [
        {"id": 1, "order_id": 1, "body": "first", "tags": ["x", "y"]},
        {"id": 2, "order_id": 2, "body": None, "tags": None},
    ]
    sequences = described["sequences"]
    assert isinstance(sequences, dict)
    assert sequences["invoice_no"] == {"last_value": 104, "is_called": True}
    assert sequences["orders_id_seq"] == {"last_value": 3, "is_called": True}
    assert "big_orders" not in tables and "truncated" not in described
    cut = kind.describe(shop, limit=2)
    assert cut["truncated"] == {"orders": 3}
    assert cut["tables"]["notes"] == tables["notes"]  # type: ignore[call-overload,index]

    data = kind.capture(shop).data
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("DELETE FROM notes WHERE id = 2")
        conn.execute("UPDATE orders SET qty = 9 WHERE id = 2")
    assert kind.describe_data(shop, data) == described
    after = kind.describe(shop)
    assert after != described
    with psycopg.connect(server + "/postgres") as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database")]
    assert "shop" in names and "shop_sbx_expected" not in names
