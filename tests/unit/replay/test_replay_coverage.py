"""Coverage: which of the recorded calls a replayed run made again, and what its calls raised
that the recording's did not. A "gone" run must have exercised the recorded run."""

from __future__ import annotations

from pathlib import Path

from replay_events import http, llm, result, tool

from sandbox import capture
from sandbox.replay import PolicySet, replay
from sandbox.replay.judging.coverage import boundary_calls, exercised
from sandbox.replay.judging.verdict import Expectation, ReplayOutcome, judge_run
from sandbox.snapshot.events import ErrorInfo, Event, ToolCall
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

STALE = ResultPredicate(path="answer", op="contains", value="30 days")


def recording() -> list[Event]:
    """A model call carried by its HTTP exchange, then a tool that makes an HTTP request."""
    return [
        http(0, "http://127.0.0.1/v1/chat/completions", {}).model_copy(update={"span": 0}),
        llm(1, "hi", parent_span=0),
        tool(2, "lookup", {"q": 1}, {"ok": 1}, span=1),
        http(3, "http://pricing/quote", {}).model_copy(update={"parent_span": 1, "span": 2}),
        tool(4, "lookup", {"q": 2}, {"ok": 2}, span=3),
        result(5, {"answer": "30 days"}),
    ]


def test_a_call_is_counted_once_and_calls_inside_it_are_part_of_it() -> None:
    calls = boundary_calls(recording())
    assert [(e.kind, e.name) for e in calls] == [
        ("llm", "chat"),
        ("tool", "lookup"),
        ("tool", "lookup"),
    ]


def test_coverage_aligns_the_kth_call_of_each_name() -> None:
    recorded = boundary_calls(recording())
    coverage, raised = exercised(recorded, recorded[:2])
    assert (coverage.made, coverage.recorded, coverage.nothing) == (2, 3, False)
    assert coverage.describe() == "2/3 recorded calls made" and raised == ()
    nothing, _ = exercised(recorded, [])
    assert nothing.nothing and nothing.describe() == "0/3 recorded calls made"


def test_a_raise_where_the_recorded_call_returned_stands_at_a_recorded_call() -> None:
    recorded = boundary_calls(recording())
    failed = tool(0, "lookup", {"q": 1}, error=ErrorInfo(type="KeyError", message="'X'"))
    extra = tool(1, "other", {}, error=ErrorInfo(type="ValueError", message="bad"))
    _, raised = exercised(recorded, [failed, extra], captured_errors={"ValueError"})
    assert [(r.call, r.error.type, r.at_recorded) for r in raised] == [
        ("tool lookup #1", "KeyError", True)
    ]


def test_a_recorded_fault_raised_again_as_a_stand_in_is_not_new() -> None:
    """A recorded ``httpx.ReadTimeout`` comes back as a stand-in class of that name when
    httpx is not imported: the same fault, not a new exception."""
    timed_out = ErrorInfo(type="httpx.ReadTimeout", message="timed out")
    recorded = [tool(0, "pay", {}, error=timed_out)]
    again = tool(
        0, "pay", {}, error=ErrorInfo(type="sandbox.replay.recorded.ReadTimeout", message="")
    )
    assert exercised(recorded, [again]) == exercised(recorded, recorded)


def run(*events: Event) -> ReplayOutcome:
    return ReplayOutcome.from_events(list(events))


def test_gone_needs_coverage_and_shows_it() -> None:
    expected = Expectation.of(None, recording(), STALE)
    short = judge_run(0, expected, run(tool(0, "lookup", {"q": 1}), result(1, {"answer": "ok"})))
    assert short.outcome == "gone"
    assert short.coverage is not None and short.coverage.describe() == "1/3 recorded calls made"
    assert short.detail.endswith("(1/3 recorded calls made)")
    polite = judge_run(0, expected, run(result(0, {"answer": "sorry"})))
    assert (polite.outcome, polite.reason) == ("inconclusive", "unexercised")
    assert "exercised nothing of the recorded run (0/3 recorded calls made)" in polite.detail


def test_statements_the_restored_state_answered_exercise_a_run_that_made_no_recorded_call() -> None:
    """A fix that reads the database instead of a stale cache and never asks the model:
    gone, with what exercised it shown; the same run with no statement answered is not."""
    expected = Expectation.of(None, recording(), STALE)
    used = ("db read table public.users", "2 Redis commands answered")
    answered = ReplayOutcome.from_events([result(0, {"answer": "no quota"})], state=used)
    verdict = judge_run(0, expected, answered)
    assert verdict.outcome == "gone"
    assert verdict.detail.endswith(
        "(0/3 recorded calls made; the restored state used: db read table public.users, "
        "2 Redis commands answered)"
    )
    assert verdict.to_json()["coverage"] == {"made": 0, "recorded": 3, "state": list(used)}
    none = judge_run(0, expected, run(result(0, {"answer": "no quota"})))
    assert (none.outcome, none.reason) == ("inconclusive", "unexercised")
    assert "exercised nothing of the recorded run (0/3 recorded calls made)" in none.detail


def test_a_caught_exception_at_a_recorded_call_is_named_and_not_gone() -> None:
    expected = Expectation.of(None, recording(), STALE)
    failed = tool(0, "lookup", {"q": 1}, error=ErrorInfo(type="KeyError", message="'DESK_RATE'"))
    verdict = judge_run(0, expected, run(failed, result(1, {"answer": "sorry"})), environ={})
    assert (verdict.outcome, verdict.reason) == ("inconclusive", "exception")
    assert "the agent caught KeyError: 'DESK_RATE'" in verdict.detail
    assert "(DESK_RATE is not set)" in verdict.detail and "tool lookup #1" in verdict.detail
    assert verdict.to_json()["raised"] == [
        "KeyError: 'DESK_RATE' (a missing environment variable (DESK_RATE is not set)) "
        "raised by tool lookup #1"
    ]


@capture.tool
def look_up(order: int) -> dict[str, int]:
    return {"order": order}


@capture.tool
def history(order: int) -> str:
    return "x" * (100 * 1024)  # long enough to be stored as a blob


def agent() -> dict[str, int]:
    """Looks an order up and reads its history; a failure there is swallowed, as agents do."""
    found = look_up(7)
    try:
        history(7)
    except Exception:
        return {"orders": 1}
    return {"orders": found["order"]}


def test_a_sandbox_error_the_agent_caught_at_a_recorded_call_is_not_gone(tmp_path: Path) -> None:
    """The recorded answer of ``history`` cannot be served (its blob is gone from the store):
    the sandbox's error reaches the agent, which catches it. The run is inconclusive with
    the error named, not "gone"."""
    store = DirectoryStore(tmp_path)
    target = Entrypoint(kind="callable", target=f"{__name__}:agent")
    with capture.run("blob", store=store, seed=1, entrypoint=target, packages=False) as rec:
        rec.set_result(agent())
        rec.mark_failed("seven orders", ResultPredicate(path="orders", op="gt", value=1))
    (recorded,) = [e for e in store.load_events(rec.run_id) if e.name == "history"]
    assert isinstance(recorded, ToolCall) and recorded.output_blob is not None
    store.delete_blob(recorded.output_blob.sha256)

    report = replay(rec.run_id, store=store, policies=PolicySet().with_rule("recorded", "tool"))
    (run,) = report.verdict.runs
    assert (run.outcome, run.reason) == ("inconclusive", "sandbox"), run.detail
    assert "the agent caught sandbox.errors.StoreError" in run.detail
    assert "raised by tool history #1" in run.detail
    assert run.coverage is not None and run.coverage.describe() == "2/2 recorded calls made"
