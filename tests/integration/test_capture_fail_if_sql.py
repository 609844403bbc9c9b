"""``sandbox capture --fail-if 'sql:postgres=...'``: a program that leaves a wrong row in a
real Postgres and exits 0 is captured failed (the Postgres it connected to is found and
captured), and its replay in a restored, frozen Postgres container reproduces the row
(exit 1)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from cli.main import main
from sandbox.snapshot.manifest import SQLInvariant
from sandbox.snapshot.store import DirectoryStore

SYNC = textwrap.dedent(
    """
    import os, psycopg
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (ref text)")
        for ref in ["A-42", "B-7", "A-42"]:  # the bug: no de-duplication
            conn.execute("INSERT INTO orders VALUES (%s)", (ref,))
    print("synced")
    """
)
DUPLICATES = "sql:postgres=SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1"


@pytest.mark.docker
def test_sql_fail_if_on_a_declared_service_reproduces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "sync.py"
    program.write_text(SYNC)
    store = DirectoryStore(tmp_path / "store")
    with postgres_server() as server:
        url = create_database(server, "shop")
        monkeypatch.setenv("DATABASE_URL", url)
        code = main(
            [
                *("capture", "--name", "sync", "--store", str(store.root)),
                *("--fail-if", DUPLICATES),
                *("--", sys.executable, str(program)),
            ]
        )
        assert code == 0  # the program thinks it succeeded
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (3,)
    (manifest,) = store.list()
    assert manifest.failure is not None and manifest.failure.observed
    assert manifest.failure.predicate == SQLInvariant(
        service="postgres", query="SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1"
    )
    assert [s.name for s in manifest.services] == ["postgres"]
    assert manifest.services[0].before is not None and manifest.services[0].after is not None
    capsys.readouterr()

    monkeypatch.delenv("DATABASE_URL")  # the replay points it at its own container
    assert main(["replay", manifest.run_id, "--times", "2", "--store", str(store.root)]) == 1
    assert "failure reproduced: 2/2 runs" in capsys.readouterr().out


@pytest.mark.docker
def test_a_fail_if_that_writes_is_refused_and_the_live_table_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "sync.py"
    program.write_text(SYNC)
    store = DirectoryStore(tmp_path / "store")
    with postgres_server() as server:
        url = create_database(server, "shop")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (ref text)")
        monkeypatch.setenv("DATABASE_URL", url)
        for text in ("DROP TABLE orders", "COMMIT; DROP TABLE orders"):
            code = main(
                [
                    *("capture", "--name", "sync", "--store", str(store.root)),
                    *("--fail-if", f"sql:postgres={text}"),
                    *("--", sys.executable, str(program)),
                ]
            )
            err = capsys.readouterr().err
            assert code == 125, err  # capture's own failure, as docker run says it
            assert f'SQL invariant "{text}"' in err and ("not DROP" in err or "2 statements" in err)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('orders') IS NOT NULL").fetchone() == (True,)
    assert store.list() == []  # refused before the program ran


@pytest.mark.docker
def test_a_live_invariant_only_reads_and_makes_nothing_on_the_server() -> None:
    from sandbox.errors import QueryRefusedError
    from sandbox.replay.judging.verdict import run_sql_live
    from sandbox.services.postgres.pgquery import ROLE

    with postgres_server() as server:
        url = create_database(server, "shop")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (ref text)")
            conn.execute("INSERT INTO orders VALUES ('A-42')")
        for text in ("COMMIT; DROP TABLE orders", "DROP TABLE orders"):
            with pytest.raises(QueryRefusedError):
                run_sql_live("postgres", url, text)
        with pytest.raises(QueryRefusedError, match="tried to write"):
            run_sql_live(
                "postgres", url, "WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d"
            )
        assert run_sql_live("postgres", url, "TABLE orders") == [("A-42",)]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)
            made = conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (ROLE,))
            assert made.fetchone() == (0,)
