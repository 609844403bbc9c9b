"""A bundle's SQL invariant is confined in the sandbox's Postgres: it cannot end the
read-only transaction (``COMMIT;``), run a program in the service container (``COPY ... TO
PROGRAM``) or write; each such invariant makes the run inconclusive, naming it. Even a
statement that got past the text check runs as a role the server refuses it to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from sandbox.containers import Environment, RestoreSpec, bring_up, connect
from sandbox.replay.judging.verdict import Expectation, ReplayOutcome, judge_run, run_sql
from sandbox.services.postgres import pgquery
from sandbox.snapshot.manifest import SQLInvariant

pytestmark = pytest.mark.docker
MARKER = "/tmp/sbx-invariant-marker"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Environment]:
    client: Any = connect()
    with bring_up([RestoreSpec("db", "postgres", database="shop")], client=client) as env:
        with psycopg.connect(env.services["db"].url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int, ref text)")
            conn.execute("INSERT INTO orders VALUES (1, 'A-42'), (2, 'A-42'), (3, 'B-7')")
        yield env
    client.close()


def judged(env: Environment, query: str) -> Any:
    outcome = ReplayOutcome(
        has_result=True, endpoints={"db": env.services["db"].url}, kinds={"db": "postgres"}
    )
    return judge_run(0, Expectation(SQLInvariant(service="db", query=query)), outcome)


def orders(env: Environment) -> int:
    with psycopg.connect(env.services["db"].url) as conn:
        row = conn.execute("SELECT count(*) FROM orders").fetchone()
    assert row is not None
    return int(row[0])


def marker_exists(env: Environment) -> bool:
    code, _ = env.exec("db", ["test", "-e", MARKER])
    return code == 0


@pytest.mark.parametrize(
    "query",
    [
        "COMMIT;",
        "SELECT 1; COMMIT; DELETE FROM orders",
        f"COPY (select 1) TO PROGRAM 'touch {MARKER}'",
        f"SELECT 1; COPY (select 1) TO PROGRAM 'touch {MARKER}'",
        "WITH d AS (DELETE FROM orders RETURNING id) SELECT * FROM d",
        "SELECT pg_read_file('/etc/passwd')",
    ],
)
def test_an_invariant_that_escapes_is_inconclusive_naming_it(
    sandbox: Environment, query: str
) -> None:
    run = judged(sandbox, query)
    assert run.outcome == "inconclusive" and run.reason == "sandbox", run
    assert query[:30] in run.detail and "service 'db'" in run.detail, run.detail
    assert not marker_exists(sandbox)
    assert orders(sandbox) == 3


def test_a_reading_invariant_still_reproduces_and_goes(sandbox: Environment) -> None:
    dup = judged(sandbox, "SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1;")
    assert dup.outcome == "reproduced" and "A-42" in dup.detail, dup
    assert judged(sandbox, "SELECT * FROM orders WHERE ref = 'none'").outcome == "gone"


def test_the_invariant_role_has_no_privilege_past_select(sandbox: Environment) -> None:
    url = sandbox.services["db"].url
    run_sql("postgres", url, "SELECT 1")  # makes the role
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, "
            "pg_has_role(rolname, 'pg_execute_server_program', 'member'), "
            "pg_has_role(rolname, 'pg_read_server_files', 'member'), "
            "pg_has_role(rolname, 'pg_write_server_files', 'member') "
            "FROM pg_roles WHERE rolname = %s",
            (pgquery.ROLE,),
        ).fetchone()
    assert row == (False, False, False, False, False, False)
    # The text check passed by: the server itself refuses the role.
    with psycopg.connect(pgquery.as_role(url), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"COPY (select 1) TO PROGRAM 'touch {MARKER}'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM orders")
    assert not marker_exists(sandbox)
    assert orders(sandbox) == 3
