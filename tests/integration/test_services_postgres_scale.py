"""The postgres kind at scale, on small data: byte-stable dumps, hashes computed in the
server, and judging that rescans only the tables a run changed."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from sandbox.services import get_kind
from sandbox.services.postgres import pg_tool, unpack_dump
from sandbox.services.postgres.pgstate import logical_state, rows_digest, state_fingerprint

pytestmark = pytest.mark.docker

SCHEMA = """
CREATE TABLE big (id int PRIMARY KEY, body text);
INSERT INTO big SELECT g, repeat('x', g % 50) FROM generate_series(1, 5000) g;
CREATE TABLE small (id int PRIMARY KEY, qty int);
INSERT INTO small VALUES (1, 1), (2, 2);
CREATE TABLE log (msg text, at int);
INSERT INTO log VALUES ('same', 1), ('same', 1), ('other', 2);
"""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def shop(server: str) -> str:
    endpoint = create_database(server, "scale")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = 'scale_sbx_rp'").fetchone():
            conn.execute("ALTER DATABASE scale_sbx_rp IS_TEMPLATE false")
            conn.execute("DROP DATABASE scale_sbx_rp")
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute(SCHEMA)
    return endpoint


def _scans(endpoint: str, table: str) -> int:
    """Sequential scans of ``table`` so far (the statistics of ended sessions included)."""
    with psycopg.connect(endpoint, autocommit=True) as conn:
        row = conn.execute(
            "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = %s", (table,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_second_capture_of_an_unchanged_database_is_the_same_bytes(shop: str) -> None:
    kind = get_kind("postgres")
    first = kind.capture(shop)
    second = kind.capture(shop)
    assert first.data == second.data
    assert first.state_hash == second.state_hash
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("UPDATE small SET qty = 3 WHERE id = 1")
    third = kind.capture(shop)
    assert third.data != first.data and third.state_hash != first.state_hash


def test_dump_is_compressed_at_level_one_by_default_and_configurable(
    shop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = get_kind("postgres")

    def level() -> str:
        _, dump = unpack_dump(kind.capture(shop).data)
        listing = subprocess.run(
            [*pg_tool("pg_restore"), "--list"], input=dump, capture_output=True, check=True
        ).stdout.decode()
        return next(line for line in listing.splitlines() if "Compression:" in line)

    assert level().split()[-1] == "1"
    monkeypatch.setenv("SANDBOX_PG_COMPRESSION", "6")
    assert level().split()[-1] == "6"


def test_server_side_version_1_digest_equals_the_python_one(shop: str) -> None:
    """Old snapshots recorded version-1 hashes computed in Python: the server computes the
    same value."""
    with psycopg.connect(shop) as conn:
        conn.execute("SET extra_float_digits = 1")
        texts = conn.execute("SELECT ROW(r.*)::text FROM ONLY big r").fetchall()
        digests = sorted(hashlib.sha256(t[0].encode()).digest() for t in texts)
        expected = {"count": len(digests), "sha256": hashlib.sha256(b"".join(digests)).hexdigest()}
        assert rows_digest(conn, psycopg.sql.Identifier("public", "big"), 1) == expected


def test_judging_rescans_only_changed_tables_and_equals_a_full_hash(shop: str) -> None:
    kind = get_kind("postgres")
    captured = kind.capture(shop)
    kind.restore(shop, captured.data)
    kind.mark_restore_point(shop)
    assert kind.state_hash(shop) == captured.state_hash

    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("UPDATE small SET qty = 7 WHERE id = 2")
        conn.execute("SET session_replication_role = replica")  # its triggers do not fire
        conn.execute("UPDATE small SET qty = 8 WHERE id = 1")
    big, small = _scans(shop, "big"), _scans(shop, "small")
    judged = kind.state_hash(shop)
    assert _scans(shop, "big") == big, "the unchanged table was not scanned"
    assert _scans(shop, "small") == small + 1, "the changed table whose triggers missed a row was"
    with psycopg.connect(shop) as conn:
        assert judged == state_fingerprint(logical_state(conn))
    assert judged != captured.state_hash

    kind.reset(shop)
    assert kind.state_hash(shop) == captured.state_hash


@pytest.mark.parametrize(
    "change",
    [
        "DELETE FROM big WHERE id = 5",
        "TRUNCATE small",
        "ALTER TABLE big ADD COLUMN extra int DEFAULT 1",
        "INSERT INTO small VALUES (3, 3)",
    ],
)
def test_every_kind_of_change_is_seen_by_a_session_still_open(shop: str, change: str) -> None:
    """The agent's session is still connected (its statistics not flushed) when judging
    starts: the session is ended and its change counted."""
    kind = get_kind("postgres")
    kind.mark_restore_point(shop)
    before = kind.state_hash(shop)
    held: psycopg.Connection[Any] = psycopg.connect(shop, autocommit=True)
    try:
        held.execute(change)
        judged = kind.state_hash(shop)
    finally:
        held.close()
    with psycopg.connect(shop) as conn:
        assert judged == state_fingerprint(logical_state(conn)) != before


def test_tables_without_extended_hashes_are_hashed_by_their_text(shop: str) -> None:
    """``json`` and ``point`` have no extended hash function: such a table's digest sums its
    rows' text hashes, and a change in it is still seen."""
    kind = get_kind("postgres")
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("CREATE TABLE shapes (id int, doc json, at point)")
        conn.execute("""INSERT INTO shapes VALUES (1, '{"a": 1}', '(1,2)')""")
        conn.execute("SET search_path = public")
        digest = rows_digest(conn, psycopg.sql.Identifier("public", "shapes"), 2)
        assert digest["by"] == "text" and digest["count"] == 1
        assert rows_digest(conn, psycopg.sql.Identifier("public", "big"), 2)["by"] == "record"
    captured = kind.capture(shop)
    kind.restore(shop, captured.data)
    kind.mark_restore_point(shop)
    assert kind.state_hash(shop) == captured.state_hash
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("""UPDATE shapes SET doc = '{"a": 2}'""")
    assert kind.state_hash(shop) != captured.state_hash


def _judged_without_scanning(shop: str, changes: list[str]) -> bool:
    """Mark a restore point, make ``changes`` in one session, judge (the hash must equal a
    full one and differ from the restore point's): whether ``big`` and ``log`` went
    unscanned."""
    kind = get_kind("postgres")
    captured = kind.capture(shop)
    kind.restore(shop, captured.data)
    kind.mark_restore_point(shop)
    with psycopg.connect(shop, autocommit=True) as conn:
        for change in changes:
            conn.execute(change)
    scans = _scans(shop, "big"), _scans(shop, "log")
    judged = kind.state_hash(shop)
    unscanned = (_scans(shop, "big"), _scans(shop, "log")) == scans
    with psycopg.connect(shop) as conn:
        assert judged == state_fingerprint(logical_state(conn)), "equals a full hash"
    assert judged != captured.state_hash
    return unscanned


@pytest.mark.parametrize(
    "changes",
    [
        ["UPDATE big SET body = 'changed' WHERE id = 4000"],
        ["DELETE FROM big WHERE id = 1", "INSERT INTO big VALUES (9999, 'new')"],
        ["UPDATE big SET body = body || '!' WHERE id % 1000 = 0", "DELETE FROM log WHERE at = 2"],
        ["DELETE FROM log WHERE ctid = (SELECT min(ctid) FROM log WHERE msg = 'same')"],
        ["INSERT INTO big VALUES (1, 'clash') ON CONFLICT (id) DO UPDATE SET body = 'upsert'"],
        ["COPY big FROM PROGRAM 'echo 7777,copied' WITH (FORMAT csv)"],
    ],
)
def test_a_changed_table_is_judged_from_its_change_triggers_without_a_scan(
    shop: str, changes: list[str]
) -> None:
    """Updates, deletes, inserts, upserts and COPY, in a table with a primary key and one
    without (duplicate rows): the digest moves by what the triggers summed, equals a full
    hash, and neither table is scanned."""
    assert _judged_without_scanning(shop, changes)


@pytest.mark.parametrize(
    "changes",
    [
        [
            "BEGIN",
            "UPDATE big SET body = 'x' WHERE id = 3",
            "ROLLBACK",
            "DELETE FROM big WHERE id = 2",
        ],
        [
            "BEGIN",
            "SAVEPOINT a",
            "DELETE FROM big WHERE id = 3",
            "ROLLBACK TO a",
            "UPDATE big SET body = 'y' WHERE id = 4",
            "COMMIT",
        ],
        ["SET session_replication_role = replica", "UPDATE big SET body = 'z' WHERE id = 5"],
        ["TRUNCATE big", "INSERT INTO big VALUES (1, 'only')"],
        ["ALTER TABLE big ALTER COLUMN body TYPE varchar(80)"],
    ],
)
def test_changes_the_triggers_cannot_account_for_are_scanned(shop: str, changes: list[str]) -> None:
    """Rolled-back work (counted by the server, not by the triggers), triggers switched off,
    a truncation, a rewrite: the table is scanned, and the hash still equals a full one."""
    assert not _judged_without_scanning(shop, changes)


def test_change_tracking_stays_out_of_the_hash_and_the_description(shop: str) -> None:
    kind = get_kind("postgres")
    kind.mark_restore_point(shop)
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("UPDATE small SET qty = 5 WHERE id = 1")
        found = conn.execute("SELECT count(*) FROM sandbox_replayer.changes").fetchone()
        assert found is not None and found[0] == 2, "the schema the agent can see"
        relations = logical_state(conn)["relations"]
    assert {r["schema"] for r in relations} == {"public"}
    tables = kind.describe(shop)["tables"]
    assert isinstance(tables, dict) and set(tables) == {"big", "small", "log"}
