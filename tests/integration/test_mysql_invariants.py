"""SQL invariants against MariaDB go through the kind's own driver, confined: one statement
that only reads, in a read-only transaction, under a time limit, and in a sandbox's own
server as a user with ``SELECT`` on the database alone."""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest

from sandbox.containers import RestoreSpec, bring_up
from sandbox.errors import QueryRefusedError
from sandbox.services import get_kind
from sandbox.services.mysql import query as mysqlquery
from sandbox.services.mysql.endpoint import Endpoint

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with bring_up([RestoreSpec("db", "mysql", database="shop")]) as env:
        url = env.services["db"].url
        ep = Endpoint.parse(url)
        conn = pymysql.connect(host=ep.host, port=ep.port, user=ep.user, database="shop")
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE orders (ref varchar(20))")
            cur.execute("INSERT INTO orders VALUES ('a'), ('a'), ('b')")
            cur.execute("CREATE SEQUENCE ticket")
        conn.commit()
        conn.close()
        yield url


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_reading_invariant_returns_its_rows(url: str, sandboxed: bool) -> None:
    rows = get_kind("mysql").query(
        url,
        "SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1;",
        limit=10,
        sandboxed=sandboxed,
    )
    assert rows == [("a",)]


@pytest.mark.parametrize(
    "text",
    [
        "DELETE FROM orders",
        "SELECT 1; DELETE FROM orders",
        "SELECT 1 FROM orders; DROP TABLE orders",
    ],
)
def test_a_statement_that_is_not_one_read_is_refused_and_nothing_changes(
    url: str, text: str
) -> None:
    with pytest.raises(QueryRefusedError):
        get_kind("mysql").query(url, text, limit=10, sandboxed=True)
    assert get_kind("mysql").query(
        url, "SELECT count(*) FROM orders", limit=1, sandboxed=False
    ) == [(3,)]


def test_a_select_that_writes_is_refused_by_the_read_only_transaction(url: str) -> None:
    with pytest.raises(QueryRefusedError, match="tried to write"):
        get_kind("mysql").query(url, "SELECT NEXTVAL(ticket)", limit=1, sandboxed=False)


def test_in_a_sandbox_the_invariant_user_reads_its_database_alone(url: str) -> None:
    kind = get_kind("mysql")
    with pytest.raises(QueryRefusedError, match="privilege"):
        kind.query(url, "SELECT user FROM mysql.user", limit=1, sandboxed=True)
    assert kind.query(url, "SELECT LOAD_FILE('/etc/passwd')", limit=1, sandboxed=True) == [(None,)]
    assert kind.query(url, "SELECT CURRENT_USER()", limit=1, sandboxed=True) == [
        (f"{mysqlquery.USER}@%",)
    ]


def test_a_long_invariant_is_stopped_at_its_time_limit(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mysqlquery, "TIMEOUT_S", 1.0)
    with pytest.raises(QueryRefusedError, match="time limit"):
        get_kind("mysql").query(url, "SELECT SLEEP(5)", limit=1, sandboxed=True)
