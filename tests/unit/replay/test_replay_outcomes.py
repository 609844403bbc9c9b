"""The three outcomes of a replayed run: reproduced, gone, and inconclusive with its reason.
A run that crashed, stopped, or could not be served is never "gone"."""

from __future__ import annotations

from typing import Any

import pytest
from replay_events import result, tool

from sandbox.replay.judging.divergence import first_divergence
from sandbox.replay.judging.unexpected import explain
from sandbox.replay.judging.verdict import (
    Expectation,
    ReplayOutcome,
    RunVerdict,
    judge,
    judge_run,
    last_boundary,
)
from sandbox.snapshot.events import ErrorInfo, Event
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    ExitCodePredicate,
    Failure,
    ResultPredicate,
    SQLInvariant,
)

DUPLICATE = ResultPredicate(path="orders", op="gt", value=1)


def ended(*events: Event, **served: Any) -> ReplayOutcome:
    return ReplayOutcome.from_events(list(events), **served)


def twice() -> ReplayOutcome:
    return ended(tool(0, "place_order", {}), result(1, {"orders": 2}))


def once() -> ReplayOutcome:
    return ended(tool(0, "place_order", {}), result(1, {"orders": 1}))


def crashed(type_: str, message: str, *before: Event) -> ReplayOutcome:
    return ended(*before, result(len(before), error=(type_, message)))


def one(expected: Expectation, outcome: ReplayOutcome, **kw: Any) -> RunVerdict:
    return judge_run(0, expected, outcome, environ=kw.pop("environ", {}), **kw)


def test_predicate_holding_is_reproduced_and_not_holding_is_gone() -> None:
    expected = Expectation(DUPLICATE)
    assert one(expected, twice()).outcome == "reproduced"
    gone = one(expected, once())
    assert (gone.outcome, gone.reason, gone.detail) == ("gone", None, "orders = 1 (gt 1)")


@pytest.mark.parametrize(
    ("type_", "message", "reason", "hint"),
    [
        ("KeyError", "'PRICING_URL'", "exception", "a missing environment variable"),
        ("httpx.ConnectError", "[Errno 111] Connection refused", "exception", "refused"),
        ("ConnectionRefusedError", "[Errno 111] Connection refused", "exception", "refused"),
        ("httpx.ReadTimeout", "timed out", "timeout", "a call timed out"),
        ("sandbox.errors.ReplayError", "no sandbox counterpart", "sandbox", "sandbox"),
        ("ValueError", "bad sku", "exception", "ValueError: bad sku"),
    ],
)
def test_a_different_exception_is_inconclusive_with_a_reason_and_hint(
    type_: str, message: str, reason: str, hint: str
) -> None:
    verdict = one(Expectation(DUPLICATE), crashed(type_, message, tool(0, "place_order", {})))
    assert verdict.outcome == "inconclusive" and verdict.reason == reason
    assert type_ in verdict.detail and hint in verdict.detail
    assert "after tool place_order #1" in verdict.detail


def test_missing_variable_hint_only_when_the_variable_is_unset() -> None:
    error = ErrorInfo(type="KeyError", message="'PRICING_URL'")
    assert explain(error, {}).hint == "a missing environment variable (PRICING_URL is not set)"
    assert explain(error, {"PRICING_URL": "http://x"}).hint is None


def test_the_recorded_exception_at_the_recorded_boundary_reproduces() -> None:
    recording = [tool(0, "charge", {}), result(1, error=("shop.Declined", "card declined"))]
    failure = Failure(error=ErrorInfo(type="shop.Declined", message="card declined"))
    expected = Expectation.of(failure, recording)
    assert expected.boundary == "tool charge #1"
    same = one(expected, crashed("shop.Declined", "card declined", tool(0, "charge", {})))
    assert same.outcome == "reproduced"
    elsewhere = one(expected, crashed("shop.Declined", "card declined"))
    assert elsewhere.outcome == "inconclusive" and elsewhere.reason == "exception"
    assert "before any boundary" in elsewhere.detail and "tool charge #1" in elsewhere.detail


def test_same_exception_type_reproduces_a_result_predicate_run() -> None:
    recording = [tool(0, "charge", {}), result(1, error=("shop.Declined", "declined"))]
    expected = Expectation.of(Failure(predicate=DUPLICATE), recording)
    verdict = one(expected, crashed("shop.Declined", "other words", tool(0, "charge", {})))
    assert verdict.outcome == "reproduced" and "as the recording did" in verdict.detail


def test_mismatch_refusal_exit_and_stalls_are_inconclusive() -> None:
    expected = Expectation(DUPLICATE)
    stopped = one(expected, ended(result(0, {"orders": 1}), mismatch="stopped at llm 'chat'"))
    assert (stopped.outcome, stopped.reason) == ("inconclusive", "mismatch")
    refused = one(expected, ended(result(0, {"orders": 2}), refused="replay refused x:1"))
    assert (refused.outcome, refused.reason) == ("inconclusive", "refused")
    assert refused.detail == "inconclusive: replay refused x:1"
    exited = one(expected, ended(result(0, {"orders": 1}), exit_code=3))
    assert (exited.outcome, exited.reason) == ("inconclusive", "exit")
    assert "exited with code 3" in exited.detail
    stalled = one(expected, ended(result(0, {"orders": 1}), stalls=1))
    assert (stalled.outcome, stalled.reason) == ("inconclusive", "order")
    assert one(expected, ended(result(0, {"orders": 2}), stalls=1)).outcome == "reproduced"


def test_a_table_outside_a_partial_capture_is_inconclusive_whatever_the_predicate() -> None:
    expected = Expectation(DUPLICATE)
    reached = "postgres: the run read table public.x, whose rows were not captured"
    for orders in (1, 2):  # neither gone nor reproduced
        verdict = one(expected, ended(result(0, {"orders": orders}), uncaptured=reached))
        assert (verdict.outcome, verdict.reason, verdict.detail) == (
            "inconclusive",
            "uncaptured",
            reached,
        )


def test_a_stall_on_another_path_is_judged() -> None:
    """A fix that calls other tools stalls the turnstile (the recorded order has no meaning
    for its calls): its run is judged, not inconclusive."""
    recorded = [tool(0, "read_stock", {}), result(1, {"orders": 1})]
    fixed = [tool(0, "take_stock", {}), result(1, {"orders": 1})]
    div = first_divergence(recorded, fixed)
    assert div is not None
    verdict = one(Expectation(DUPLICATE), ended(*fixed, stalls=1, divergence=div))
    assert verdict.outcome == "gone"


def test_a_predicate_that_cannot_be_checked_is_inconclusive() -> None:
    verdict = one(Expectation(SQLInvariant(service="db", query="select 1")), once())
    assert (verdict.outcome, verdict.reason) == ("inconclusive", "sandbox")
    assert "needs service 'db'" in verdict.detail


def test_exit_codes_and_summary_count_all_three() -> None:
    bad = crashed("KeyError", "'PRICING_URL'")
    assert judge(DUPLICATE, [twice(), once(), bad], environ={}).exit_code == 1
    assert judge(DUPLICATE, [once(), once()], environ={}).exit_code == 0
    mixed = judge(DUPLICATE, [once(), bad], environ={})
    assert (mixed.outcome, mixed.exit_code) == ("inconclusive", 2)
    assert mixed.summary() == (
        "could not judge: 0/2 runs reproduced (1 gone, 1 inconclusive: a different exception)"
    )
    assert mixed.to_json()["reasons"] == ["a different exception"]


def test_run_verdicts_round_trip_through_json() -> None:
    verdict = judge(DUPLICATE, [twice(), once(), crashed("KeyError", "'X'")], environ={})
    back = [RunVerdict.from_json(r.to_json()) for r in verdict.runs]
    assert [(r.outcome, r.reason, r.detail) for r in back] == [
        (r.outcome, r.reason, r.detail) for r in verdict.runs
    ]
    legacy = RunVerdict.from_json({"run": 0, "reproduced": False, "detail": "?"})
    assert (legacy.outcome, legacy.reason) == ("inconclusive", "sandbox")


def test_last_boundary_counts_crossings_of_the_same_name() -> None:
    events = [tool(0, "a", {}), tool(1, "b", {}), tool(2, "a", {}), result(3, None)]
    assert last_boundary(events) == "tool a #2"
    assert last_boundary([result(0, None)]) is None


def test_exception_predicate_at_another_boundary_is_inconclusive() -> None:
    recording = [tool(0, "lookup", {}), result(1, error=("KeyError", "'sku'"))]
    failure = Failure(
        predicate=ExceptionPredicate(type="KeyError"), error=ErrorInfo(type="KeyError", message="")
    )
    expected = Expectation.of(failure, recording)
    early = one(expected, crashed("KeyError", "'PRICING_URL'"))
    assert (early.outcome, early.reason) == ("inconclusive", "exception")
    same = one(expected, crashed("KeyError", "'sku'", tool(0, "lookup", {})))
    assert same.outcome == "reproduced"


def test_exit_code_predicate() -> None:
    """A command that signals failure by its exit code alone; an exit code caused by another
    exception than the recorded one is not the failure."""
    expected = Expectation(ExitCodePredicate(op="ne", value=0))
    assert one(expected, ended(result(0, None), exit_code=3)).outcome == "reproduced"
    assert one(expected, ended(result(0, None), exit_code=0)).outcome == "gone"
    error = ErrorInfo(type="KeyError", message="'PRICING_URL'")
    crash = one(expected, ReplayOutcome(error=error, exit_code=1))
    assert (crash.outcome, crash.reason) == ("inconclusive", "exception")
    in_process = one(expected, crashed("shop.Declined", "no"))  # a function: exit code 1
    assert in_process.outcome == "inconclusive"
    recorded = [tool(0, "pay", {}), result(1, error=("shop.Declined", "no"))]
    same = Expectation.of(Failure(predicate=ExitCodePredicate()), recorded)
    assert one(same, crashed("shop.Declined", "no", tool(0, "pay", {}))).outcome == "reproduced"
