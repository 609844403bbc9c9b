from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from replay_events import result

from sandbox.errors import PredicateError, QueryRefusedError, ReplayError, ServiceError
from sandbox.replay.judging.verdict import (
    ReplayOutcome,
    evaluate,
    judge,
    predicate_for,
    resolve_path,
    run_sql,
    type_name_matches,
)
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    Failure,
    MarkedPredicate,
    ResultPredicate,
    SQLInvariant,
)


def raised(type_: str, message: str = "") -> ReplayOutcome:
    return ReplayOutcome(error=ErrorInfo(type=type_, message=message))


def returned(value: Any) -> ReplayOutcome:
    return ReplayOutcome(result=value, has_result=True)


@pytest.mark.parametrize(
    ("expected", "actual", "match"),
    [
        ("shop.errors.DuplicateOrder", "shop.errors.DuplicateOrder", True),
        ("DuplicateOrder", "shop.errors.DuplicateOrder", True),
        ("shop.errors.DuplicateOrder", "DuplicateOrder", True),
        ("builtins.ValueError", "ValueError", True),
        ("shop.errors.DuplicateOrder", "other.DuplicateOrder", False),
        ("DuplicateOrder", "shop.errors.Duplicate", False),
    ],
)
def test_exception_type_names(expected: str, actual: str, match: bool) -> None:
    assert type_name_matches(expected, actual) is match


def test_exception_predicate() -> None:
    predicate = ExceptionPredicate(type="DuplicateOrder", message_contains="order 42")
    assert evaluate(predicate, raised("shop.DuplicateOrder", "order 42 twice")).holds
    miss = evaluate(predicate, raised("shop.DuplicateOrder", "order 43 twice"))
    assert not miss.holds and "lacks 'order 42'" in miss.detail
    assert not evaluate(predicate, raised("KeyError", "order 42")).holds
    none = evaluate(predicate, returned({"ok": True}))
    assert not none.holds and none.detail == "the run ended without an exception"


@pytest.mark.parametrize(
    ("path", "op", "value", "holds"),
    [
        ("orders.0.status", "eq", "refunded", True),
        ("orders.-1.status", "eq", "paid", True),
        ("orders.0.status", "ne", "refunded", False),
        ("refunds", "gt", 1, True),
        ("refunds", "lt", 2, False),
        ("refunds", "eq", 2.0, True),
        ("flag", "eq", 1, False),  # True is not 1
        ("message", "contains", "twice", True),
        ("message", "not_contains", "twice", False),
        ("orders", "contains", {"id": 2, "status": "paid"}, True),
        ("orders", "not_contains", {"id": 3, "status": "paid"}, True),
        ("", "contains", "refunds", True),
        ("missing.path", "ne", "x", False),
        ("orders.9", "eq", None, False),
        ("message", "gt", 3, False),
    ],
)
def test_result_predicate(path: str, op: Any, value: Any, holds: bool) -> None:
    outcome = returned(
        {
            "orders": [{"id": 1, "status": "refunded"}, {"id": 2, "status": "paid"}],
            "refunds": 2,
            "flag": True,
            "message": "refunded twice",
        }
    )
    assert evaluate(ResultPredicate(path=path, op=op, value=value), outcome).holds is holds


def test_result_predicate_explains_itself() -> None:
    outcome = returned({"refunds": 2})
    found = evaluate(ResultPredicate(path="refunds", op="gt", value=1), outcome)
    assert found.detail == "refunds = 2 (gt 1)"
    missing = evaluate(ResultPredicate(path="orders.0", op="eq", value=1), outcome)
    assert missing.detail == "orders.0 does not exist in the result"
    crashed = evaluate(ResultPredicate(path="x"), raised("Boom"))
    assert crashed.detail == "the run produced no final result (it raised Boom)"
    with pytest.raises(PredicateError, match="needs a number or a string"):
        evaluate(ResultPredicate(path="x", op="gt", value=[1]), outcome)


@given(st.lists(st.integers(), max_size=5), st.integers(-7, 7))
def test_resolve_path_indexes_like_python(items: list[int], index: int) -> None:
    found, value = resolve_path({"a": items}, f"a.{index}")
    in_range = -len(items) <= index < len(items)
    assert found is in_range
    if in_range:
        assert value == items[index]


def test_outcome_from_events_reads_the_last_result() -> None:
    ok = ReplayOutcome.from_events([result(0, "draft"), result(1, {"n": 1})])
    assert ok.has_result and ok.result == {"n": 1} and ok.error is None
    failed = ReplayOutcome.from_events([result(0, error=("shop.Duplicate", "twice"))])
    assert not failed.has_result and failed.error is not None
    assert evaluate(ExceptionPredicate(type="Duplicate"), failed).holds
    assert not ReplayOutcome.from_events([]).has_result


def test_marked_predicate_holds_when_the_run_marks_itself_failed() -> None:
    """The reason comes from the log's last failure mark; ``reason_contains`` narrows it."""
    from sandbox.names import FAILURE_EVENT
    from sandbox.snapshot.events import StateTransition

    mark = StateTransition(
        seq=0,
        wall=0.0,
        mono=0.0,
        name=FAILURE_EVENT,
        target="failed",
        data={"failure": {"reason": "stale 20"}},
    )
    marked = ReplayOutcome.from_events([mark, result(1, {"n": 1})])
    assert marked.marked == "stale 20"
    assert evaluate(MarkedPredicate(), marked).holds
    assert evaluate(MarkedPredicate(reason_contains="stale"), marked).holds
    other = evaluate(MarkedPredicate(reason_contains="HTTP 5"), marked)
    assert not other.holds and "not with 'HTTP 5'" in other.detail
    unmarked = evaluate(MarkedPredicate(), ReplayOutcome.from_events([result(0, {"n": 1})]))
    assert not unmarked.holds and unmarked.detail == "the run did not mark itself failed"


def test_sql_invariant_with_an_injected_runner() -> None:
    calls: list[tuple[str, str, str]] = []

    def runner(kind: str, endpoint: str, query: str) -> list[tuple[Any, ...]]:
        calls.append((kind, endpoint, query))
        return [(42, 2)] if "having" in query else []

    outcome = ReplayOutcome(endpoints={"db": "postgresql://u@h/d"}, kinds={"db": "postgres"})
    dup = SQLInvariant(service="db", query="select order_id, count(*) ... having count(*) > 1")
    found = evaluate(dup, outcome, sql=runner)
    assert found.holds and "[42, 2]" in found.detail
    assert not evaluate(
        SQLInvariant(service="db", query="select 1 where false"), outcome, sql=runner
    ).holds
    assert calls[0][:2] == ("postgres", "postgresql://u@h/d")
    with pytest.raises(ReplayError, match=r"needs service 'cache'.*has db"):
        evaluate(SQLInvariant(service="cache", query="select 1"), outcome, sql=runner)


def test_verdict_counts_and_exit_code() -> None:
    predicate = ExceptionPredicate(type="DuplicateOrder")
    outcomes = [raised("DuplicateOrder"), returned(None), raised("DuplicateOrder")]
    verdict = judge(predicate, outcomes)
    assert (verdict.reproduced, verdict.gone, verdict.total, verdict.exit_code) == (2, 1, 3, 1)
    assert verdict.summary() == "failure reproduced: 2/3 runs (1 gone, 0 inconclusive)"
    assert verdict.to_json()["runs"][1] == {  # type: ignore[index]
        "run": 1,
        "outcome": "gone",
        "reproduced": False,
        "reason": None,
        "detail": "the run ended without an exception",
        "coverage": {"made": 0, "recorded": 0, "state": []},
        "raised": [],
        "divergence": None,
    }
    fixed = judge(predicate, [returned(None)] * 3)
    assert (fixed.outcome, fixed.exit_code, fixed.reproduced_any) == ("gone", 0, False)
    assert fixed.summary() == "failure gone: 0/3 runs reproduced (3 gone, 0 inconclusive)"


def test_predicate_for_failure() -> None:
    recorded = SQLInvariant(service="db", query="select 1")
    assert predicate_for(Failure(predicate=recorded)) is recorded
    from_error = predicate_for(Failure(error=ErrorInfo(type="shop.Duplicate", message="")))
    assert from_error == ExceptionPredicate(type="shop.Duplicate")
    with pytest.raises(ReplayError, match="no failure predicate"):
        predicate_for(Failure())
    with pytest.raises(ReplayError):
        predicate_for(None)


# --- a real Postgres -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    import psycopg
    from testcontainers.core.container import DockerContainer

    container = DockerContainer("sandbox-replayer/postgres:15").with_kwargs(
        labels={"org.sandbox-replayer.test": "replay-verdict"}
    )
    container.ports["5432/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]  # loopback
    with container:
        port = container.get_exposed_port(5432)
        endpoint = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(endpoint, connect_timeout=2, autocommit=True) as conn:
                    conn.execute("create table orders (id int, order_ref text)")
                    conn.execute("insert into orders values (1, 'A-42'), (2, 'A-42'), (3, 'B-7')")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield endpoint


DUPLICATES = "select order_ref, count(*) from orders group by order_ref having count(*) > 1"


@pytest.mark.docker
def test_sql_invariant_against_postgres(postgres: str) -> None:
    outcome = ReplayOutcome(endpoints={"db": postgres}, kinds={"db": "postgres"})
    found = evaluate(SQLInvariant(service="db", query=DUPLICATES), outcome)
    assert found.holds and "A-42" in found.detail
    clean = "select * from orders where order_ref = 'none'"
    assert not evaluate(SQLInvariant(service="db", query=clean), outcome).holds


@pytest.mark.docker
def test_sql_invariant_is_read_only_and_errors_are_clear(postgres: str) -> None:
    with pytest.raises(QueryRefusedError, match=r"one read-only statement.*not DELETE"):
        run_sql("postgres", postgres, "delete from orders returning id")
    with pytest.raises(QueryRefusedError, match="tried to write"):
        run_sql("postgres", postgres, "with d as (delete from orders returning id) select * from d")
    assert len(run_sql("postgres", postgres, "select * from orders")) == 3
    with pytest.raises(ServiceError, match="UndefinedTable"):
        run_sql("postgres", postgres, "select * from nope")
