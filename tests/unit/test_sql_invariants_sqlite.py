"""SQL invariants are one statement that only reads (``sandbox.services.sqlquery``), and a
``sqlite`` service answers them with its own driver, opened read-only: an invariant that
tries to write is refused and the run is inconclusive, naming it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import QueryRefusedError
from sandbox.replay.judging.verdict import Expectation, ReplayOutcome, evaluate, judge_run
from sandbox.services.sqlquery import MAX_CHARS, READ_STATEMENTS, read_statement
from sandbox.snapshot.manifest import SQLInvariant

DUPLICATES = "SELECT order_id FROM refunds GROUP BY order_id HAVING count(*) > 1"


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("select 1;", "select 1"),
        ("SELECT ';' AS semicolon", "SELECT ';' AS semicolon"),
        ("-- why\nselect $$a;b$$", "-- why\nselect $$a;b$$"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "WITH x AS (SELECT 1) SELECT * FROM x"),
        ("VALUES (1)", "VALUES (1)"),
        ("SHOW TimeZone", "SHOW TimeZone"),
        ("TABLE orders", "TABLE orders"),
    ],
)
def test_one_reading_statement_passes(text: str, statement: str) -> None:
    assert read_statement(text)[0] == statement


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("COMMIT;", "not COMMIT"),
        ("select 1; commit", "2 statements"),
        ("select 1; DROP TABLE orders", "2 statements"),
        ("COPY (select 1) TO PROGRAM 'touch /tmp/marker'", "not COPY"),
        ("DROP TABLE orders", "not DROP"),
        ("WITH x AS (SELECT 1) DELETE FROM orders", "ends in DELETE"),
        ("  ;  ", "no statement"),
    ],
)
def test_anything_else_is_refused(text: str, why: str) -> None:
    with pytest.raises(QueryRefusedError, match=why):
        read_statement(text)


@given(st.text(max_size=200))
def test_any_text_is_one_reading_statement_or_refused_with_a_reason(text: str) -> None:
    try:
        statement, first = read_statement(text)
    except QueryRefusedError as exc:
        assert str(exc)
    else:
        assert first in READ_STATEMENTS and statement.strip()


@given(st.sampled_from(["COMMIT", "DROP TABLE t", "SELECT 2", "DELETE FROM t"]))
def test_a_second_statement_after_a_select_is_refused(second: str) -> None:
    with pytest.raises(QueryRefusedError, match="2 statements"):
        read_statement(f"SELECT 1; {second}")


def test_a_huge_or_deeply_nested_query_is_refused_quickly() -> None:
    with pytest.raises(QueryRefusedError, match="longer than"):
        read_statement("SELECT " + "1," * MAX_CHARS + "1")
    with pytest.raises(QueryRefusedError, match="cannot be read"):
        read_statement("SELECT " + "(" * 4000 + "1" + ")" * 4000)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE refunds (order_id TEXT, amount REAL)")
        conn.execute("INSERT INTO refunds VALUES ('A-1', 42), ('A-1', 42), ('B-2', 7)")
    conn.close()
    return path


def outcome(path: Path) -> ReplayOutcome:
    return ReplayOutcome(
        has_result=True, endpoints={"ledger": str(path)}, kinds={"ledger": "sqlite"}
    )


def test_a_sqlite_invariant_holds_or_not_by_sqlite3(ledger: Path) -> None:
    found = evaluate(SQLInvariant(service="ledger", query=DUPLICATES), outcome(ledger))
    assert found.holds and "A-1" in found.detail
    clean = SQLInvariant(service="ledger", query="SELECT * FROM refunds WHERE amount > 100")
    assert not evaluate(clean, outcome(ledger)).holds


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM refunds",
        "SELECT 1; DELETE FROM refunds",
        "WITH x AS (SELECT 1) DELETE FROM refunds",
        "SELECT * FROM refunds WHERE 0 UNION SELECT load_extension('x'), 1",
    ],
)
def test_a_sqlite_invariant_that_writes_is_inconclusive_naming_it(ledger: Path, query: str) -> None:
    before = ledger.read_bytes()
    run = judge_run(0, Expectation(SQLInvariant(service="ledger", query=query)), outcome(ledger))
    assert run.outcome == "inconclusive" and run.reason == "sandbox", run
    assert query[:40] in run.detail and "'ledger'" in run.detail, run.detail
    assert ledger.read_bytes() == before
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (3,)
    conn.close()


def test_a_sqlite_invariant_cannot_attach_another_file(ledger: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    attach = SQLInvariant(service="ledger", query=f"ATTACH DATABASE '{other}' AS other")
    refused = judge_run(0, Expectation(attach), outcome(ledger))
    assert refused.outcome == "inconclusive" and "not ATTACH" in refused.detail
    assert not other.exists()
