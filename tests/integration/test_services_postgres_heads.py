"""Dumps made without ``pg_dump`` against a real server: an earlier archive's head filled
with rows read by ``COPY`` restores exactly as ``pg_dump``'s own archive of the same
snapshot, the schema's fingerprint moves with every kind of DDL and never with rows, and the
postgres kind dumps a schema it has seen without running ``pg_dump`` again."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from sandbox.services.postgres import kind as postgres_kind
from sandbox.services.postgres import pgarchive, pgheads, pgschema
from sandbox.services.postgres.kind import _Endpoint, pg_tool, unpack_dump
from sandbox.services.registry import get_kind

pytestmark = pytest.mark.docker

SCHEMA = r"""
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE TABLE kinds (
  id serial PRIMARY KEY, t text, ts timestamptz, d date, iv interval, f float8, n numeric,
  b bytea, j jsonb, a int[], m mood, big bigint GENERATED ALWAYS AS (id * 1000) STORED
);
CREATE TABLE quiet (id int PRIMARY KEY);
CREATE SCHEMA "odd schema";
CREATE TABLE "odd schema"."Odd Table" ("a b" text);
INSERT INTO kinds (t, ts, d, iv, f, n, b, j, a, m) VALUES
  (E'tab\there\nnew line \\ back', '2026-12-05 10:00:00.123456+02', '2026-01-31',
   '1 day 02:03:04.5', 0.1, 12345678901234567890.5, '\x00ff', '{"k": [1, "é"]}', '{1,NULL}',
   'sad'),
  (NULL, NULL, NULL, NULL, 'NaN', NULL, NULL, NULL, NULL, NULL);
INSERT INTO "odd schema"."Odd Table" VALUES ('x');
"""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def db(server: str) -> str:
    endpoint = create_database(server, "heads")
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute(SCHEMA)
    return endpoint


def _pg_dump(endpoint: str, *args: str) -> bytes:
    ep = _Endpoint.parse(endpoint)
    dump = postgres_kind._run_tool(
        "pg_dump", ["--format=custom", *args, f"--dbname={ep.conninfo(password=False)}"], ep
    )
    return pgarchive.stabilize(dump)


SKIPPED = ("\\restrict", "\\unrestrict", "SELECT pg_catalog.setval(")


def _as_sql(dump: bytes) -> str:
    """The archive as SQL, but for the random key of ``pg_restore``'s ``\\restrict`` lines
    and the sequences' values (a head keeps its own dump's: a restore sets the capture's
    from its header, see test_the_kind_dumps_a_schema_it_has_seen_without_pg_dump)."""
    done = subprocess.run(
        [*pg_tool("pg_restore"), "--file=-"], input=dump, capture_output=True, check=True
    )
    lines = done.stdout.decode().splitlines()
    return "\n".join(x for x in lines if not x.startswith(SKIPPED))


def _write_more(endpoint: str) -> None:
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO kinds (t, f) SELECT 'row ' || g, g / 3.0 FROM generate_series(1, 5000) g"
        )
        conn.execute("UPDATE kinds SET t = E'changed\\\\\\t' WHERE id = 1")
        conn.execute("""INSERT INTO "odd schema"."Odd Table" VALUES (NULL)""")


@pytest.mark.parametrize("level", [0, 1])
def test_a_head_filled_with_new_rows_reads_back_as_pg_dumps_archive_of_the_same_snapshot(
    db: str, level: int
) -> None:
    """The archive rebuilt from an older archive's head and rows read by COPY reads back
    (``pg_restore``) as the same SQL as ``pg_dump``'s archive of the same snapshot, rows
    written since the head included, and its blocks are laid out as ``pg_dump`` lays them."""
    head = pgarchive.layout(_pg_dump(db, f"--compress={level}", "--exclude-table-data=quiet"))
    assert head is not None
    assert sorted(t.name for t in head.tables) == ["Odd Table", "kinds"]
    assert head.compressed == (level != 0)
    _write_more(db)
    with psycopg.connect(db) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        snapshot = str((conn.execute("SELECT pg_export_snapshot()").fetchone() or ("",))[0])
        theirs = _pg_dump(
            db, f"--compress={level}", "--exclude-table-data=quiet", f"--snapshot={snapshot}"
        )
        ours = pgheads.dump(conn, head, "UTF8", level)
    assert _as_sql(ours) == _as_sql(theirs)
    assert "row 5000" in _as_sql(ours)
    again = pgarchive.layout(ours)
    assert again is not None and again.head == head.head


def test_layout_refuses_what_it_cannot_fill(db: str) -> None:
    """Large objects, a cut archive and a plain byte string have no layout."""
    dump = _pg_dump(db)
    assert pgarchive.layout(dump) is not None
    assert pgarchive.layout(dump[:-3]) is None
    assert pgarchive.layout(b"PGDMP" + bytes(40)) is None
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT lo_from_bytea(0, 'blob')")
    assert pgarchive.layout(_pg_dump(db)) is None


def test_rows_are_read_here_only_up_to_the_limit_and_only_from_tables_still_there(
    db: str,
) -> None:
    head = pgarchive.layout(_pg_dump(db))
    assert head is not None
    with psycopg.connect(db) as conn:
        assert pgheads.fits(conn, head)
        assert not pgheads.fits(conn, head, limit=8192)
        conn.execute("DROP TABLE quiet")
        assert not pgheads.fits(conn, head), "a table of the head is gone"
        assert conn.execute("SELECT 1").fetchone() == (1,), "the transaction goes on"


def _fingerprint(endpoint: str) -> str | None:
    with psycopg.connect(endpoint) as conn:
        return pgschema.fingerprint(conn)


DDL = [
    "ALTER TABLE quiet ADD COLUMN note text",
    "CREATE INDEX ON kinds (t)",
    "COMMENT ON TABLE quiet IS 'still'",
    "GRANT SELECT ON quiet TO PUBLIC",
    "ALTER TYPE mood ADD VALUE 'glad'",
    "ALTER TABLE kinds ALTER COLUMN t SET DEFAULT 'x'",
    "DROP TABLE quiet",
    "CREATE FUNCTION one() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "ALTER SEQUENCE kinds_id_seq INCREMENT BY 2",
    "CREATE VIEW v AS SELECT 1 AS x",
]


@pytest.mark.parametrize("statement", DDL)
def test_the_schema_fingerprint_moves_with_ddl(db: str, statement: str) -> None:
    before = _fingerprint(db)
    assert before is not None
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(statement)
    assert _fingerprint(db) != before


def test_the_schema_fingerprint_stays_with_rows_sequences_and_vacuum(db: str) -> None:
    before = _fingerprint(db)
    with psycopg.connect(db, autocommit=True) as conn:
        _write_more(db)
        conn.execute("DELETE FROM kinds WHERE id > 2")
        conn.execute("SELECT nextval('kinds_id_seq')")
        conn.execute("VACUUM ANALYZE kinds")
        conn.execute("ANALYZE")
    assert _fingerprint(db) == before


def _counted_pg_dumps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []
    real = postgres_kind._run_tool

    def counted(tool: str, *args: Any, **kwargs: Any) -> bytes:
        ran.append(tool)
        return real(tool, *args, **kwargs)

    monkeypatch.setattr(postgres_kind, "_run_tool", counted)
    return ran


def _restored_rows(server: str, data: bytes) -> dict[str, list[tuple[Any, ...]]]:
    target = create_database(server, "heads_restored")
    get_kind("postgres").restore(target, data)
    with psycopg.connect(target) as conn:
        return {
            "kinds": conn.execute("SELECT k::text FROM kinds k ORDER BY id").fetchall(),
            "quiet": conn.execute("SELECT * FROM quiet ORDER BY 1").fetchall(),
            "next": conn.execute("SELECT nextval('kinds_id_seq')").fetchall(),
        }


def test_the_kind_dumps_a_schema_it_has_seen_without_pg_dump(
    db: str, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second capture of an unchanged schema runs no ``pg_dump`` and restores the rows
    and sequences of its moment; after DDL, ``pg_dump`` runs again and the new column is
    restored."""
    ran = _counted_pg_dumps(monkeypatch)
    kind = get_kind("postgres")
    kind.capture(db)
    assert ran == ["pg_dump"]
    _write_more(db)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT setval('kinds_id_seq', 9000)")
        expected = {
            "kinds": conn.execute("SELECT k::text FROM kinds k ORDER BY id").fetchall(),
            "quiet": [],
            "next": [(9001,)],
        }
    second = kind.capture(db)
    assert ran == ["pg_dump"], "the second dump ran pg_dump"
    header, _ = unpack_dump(second.data)
    assert header["sequences"]["public.kinds_id_seq"] == [9000, True]
    assert _restored_rows(server, second.data) == expected
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("ALTER TABLE quiet ADD COLUMN note text DEFAULT 'n'")
        conn.execute("INSERT INTO quiet VALUES (1)")
    third = kind.capture(db)
    assert ran == ["pg_dump", "pg_restore", "pg_dump"]
    assert _restored_rows(server, third.data)["quiet"] == [(1, "n")]
