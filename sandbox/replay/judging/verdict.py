"""The verdict: did the recorded failure come back?

A failure predicate is evaluated against the outcome of each replayed run:

- :class:`~sandbox.snapshot.manifest.ExceptionPredicate`: the run ended with an exception of
  that type (a qualified name matches the same qualified name, a bare name matches any
  module's class of that name) whose message contains ``message_contains``;
- :class:`~sandbox.snapshot.manifest.ResultPredicate`: the final result, at a dot path
  (``orders.0.status``; numbers index lists, empty means the whole value), compares true with
  ``eq``, ``ne``, ``contains``, ``not_contains``, ``gt`` or ``lt``. A path that does not
  exist, or a value of another type than the comparison needs, makes the predicate false, and
  the run's detail says why;
- :class:`~sandbox.snapshot.manifest.SQLInvariant`: the query, run against the named service
  of the replay by its kind's own driver (:class:`~sandbox.services.base.SQLQuery`), returns
  at least one row. It runs confined: one statement that only reads, in a read-only
  transaction, with a time limit, and in a sandbox's own server as its kind confines it
  further (a role without privileges);
  a query refused (one that tries to write) makes the run inconclusive, naming it.
- :class:`~sandbox.snapshot.manifest.ExitCodePredicate`: the run's exit code compares true
  (a function run in-process exits 0, or 1 when an exception ended it). An exit code that
  comes from another exception than the recorded one does not count: that run is
  inconclusive.
- :class:`~sandbox.snapshot.manifest.MarkedPredicate`: the run marked itself failed
  (``capture.mark_failed``; with a reason containing ``reason_contains``, when given): what
  a run marked failed without a predicate of its own is judged by.

**Three outcomes.** Each replayed run is *reproduced* (the predicate holds, or the run ended
with the recorded exception's type at the recorded boundary), *gone* (the run completed,
every boundary was served, the predicate does not hold, and the run exercised the recorded
run: :mod:`sandbox.replay.judging.coverage`) or *inconclusive*, with a reason
(:data:`~sandbox.replay.judging.unexpected.Reason`): a recording mismatch, a connection outside the
sandbox refused, a different exception (named, with a hint; also one a replayed call raised
where the recorded call did not, which the agent caught), a non-zero exit, a sandbox error,
a timeout, the recorded order of concurrent calls not kept, none of the recorded calls
made and none of the restored state used. A crash is never "gone": a false
"fixed" ships the bug, and a crash outranks a predicate that cannot be checked. Every run's
verdict carries its coverage.

**Exit code.** :attr:`Verdict.exit_code`, which ``sandbox replay`` exits with: **1** when
the failure reproduced in at least one of the N runs, **0** when every run was judged and
none reproduced, **2** when none reproduced and at least one could not be judged. (The CLI
also exits 2 on bad input, a :class:`~sandbox.errors.SandboxError`, and 3 on an internal
error.) A regression test for a fixed bug asserts ``verdict.exit_code == 0``: an
inconclusive replay fails it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from sandbox.errors import PredicateError, ReplayError, SandboxError
from sandbox.replay.conditions.deadline import describe as describe_timeout
from sandbox.replay.judging.coverage import Coverage, boundary_calls, exercised, raised_types
from sandbox.replay.judging.divergence import Divergence
from sandbox.replay.judging.jsondiff import json_equal, short
from sandbox.replay.judging.unexpected import REASON_TEXT, REASONS, Reason, explain
from sandbox.services.statecapture import redact_endpoint
from sandbox.snapshot.events import ErrorInfo, Event, FinalResult
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    ExitCodePredicate,
    Failure,
    MarkedPredicate,
    Predicate,
    ResultPredicate,
    SQLInvariant,
    marked_failure,
)

SQLRunner = Callable[[str, str, str], Sequence[tuple[Any, ...]]]
"""``(kind, endpoint, query) -> rows`` (a few at most): how an :class:`SQLInvariant` is
checked (:func:`run_sql` in a sandbox, :func:`run_sql_live` against a live service)."""

EVIDENCE_ROWS = 5


@dataclass(frozen=True)
class ReplayOutcome:
    """How one replayed run ended, as the verdict needs it."""

    error: ErrorInfo | None = None
    """The exception that ended the run, if one did."""
    result: Any = None
    has_result: bool = False
    endpoints: Mapping[str, str] = field(default_factory=dict)
    """Service name → endpoint of the restored service (for SQL invariants)."""
    kinds: Mapping[str, str] = field(default_factory=dict)
    """Service name → its kind (whose driver checks an SQL invariant)."""
    divergence: Divergence | None = None
    boundary: str | None = None
    """The last boundary the run crossed before it ended (:func:`last_boundary`)."""
    exit_code: int | None = None
    """The exit code of a replayed command (``None``: a function that returned or raised)."""
    mismatch: str | None = None
    """What stopped the run: a request the recording cannot answer."""
    stalls: int = 0
    """Times the recorded order of concurrent calls could not be kept."""
    refused: str | None = None
    """A connection outside the sandbox that was refused (the first one)."""
    timed_out: float | None = None
    """The run was stopped at this wall-clock limit, in seconds."""
    uncaptured: str | None = None
    """State the run read or wrote that a partial capture did not hold (see the kind's
    :class:`~sandbox.services.base.TouchedCapture`), described."""
    calls: tuple[Event, ...] = ()
    """The boundary calls the run made (:func:`~sandbox.replay.judging.coverage.boundary_calls`)."""
    state: tuple[str, ...] = ()
    """What of the restored state the run read or wrote, described (looked for when it
    made none of the recorded calls: :class:`~sandbox.replay.judging.coverage.Coverage`)."""
    marked: str | None = None
    """The reason the run marked itself failed with (``capture.mark_failed``), if it did."""
    exited: int | None = None
    """The code the agent gave ``os._exit`` in the replay's process, which outlived it
    (:mod:`sandbox.replay.isolation.exits`)."""
    unreached: str | None = None
    """The replayed program never entered the run's ``capture.run`` block, described
    (:mod:`sandbox.replay.window`)."""
    before: str | None = None
    """What the replayed program did outside the run's block (before it, or beside it),
    described: the runs it opened first, or at once, may have changed the restored
    state."""

    @property
    def effective_exit_code(self) -> int:
        """The command's exit code; for a function run in-process, 1 when an exception
        ended it, else 0."""
        if self.exit_code is not None:
            return self.exit_code
        return 1 if self.error is not None else 0

    @classmethod
    def from_events(
        cls,
        events: Sequence[Event],
        *,
        endpoints: Mapping[str, str] | None = None,
        divergence: Divergence | None = None,
        **served: Any,
    ) -> ReplayOutcome:
        """The outcome recorded by the last ``result`` event of a replayed log; ``served``
        sets the other fields (``exit_code``, ``mismatch``, ``stalls``, ``refused`` ...)."""
        final = next((e for e in reversed(events) if isinstance(e, FinalResult)), None)
        if "marked" not in served:  # read from the log only when the caller did not say
            served["marked"] = marked_reason(events)
        return cls(
            error=final.error if final else None,
            result=final.value if final else None,
            has_result=final is not None and final.error is None,
            endpoints=dict(endpoints or {}),
            divergence=divergence,
            boundary=last_boundary(events),
            calls=boundary_calls(events),
            **served,
        )


def marked_reason(events: Sequence[Event]) -> str | None:
    """The reason of the last failure a log marked (``capture.mark_failed``), if any."""
    marked = marked_failure(events)
    return None if marked is None else marked.reason


_NOT_BOUNDARIES = frozenset({"state", "random", "clock"})
"""Kinds that are not where a failure surfaces: agent states, and values served (entropy is
drawn process-wide, so its count differs between capture and replay)."""


def last_boundary(events: Sequence[Event]) -> str | None:
    """Where a log ended: the last boundary crossed before its final result, as
    ``kind name #n`` (the n-th crossing of that name); ``None`` when it crossed none."""
    last: Event | None = None
    count: dict[tuple[str, str], int] = {}
    for event in events:
        if isinstance(event, FinalResult):
            break
        if event.kind not in _NOT_BOUNDARIES:
            last = event
            count[(event.kind, event.name)] = count.get((event.kind, event.name), 0) + 1
    if last is None:
        return None
    return f"{last.kind} {last.name or '(unnamed)'} #{count[(last.kind, last.name)]}"


@dataclass(frozen=True)
class Evaluation:
    holds: bool
    """The failure is present in this run."""
    detail: str


def type_name_matches(expected: str, actual: str) -> bool:
    """``a.b.Err`` matches ``a.b.Err`` and ``Err``; ``Err`` matches any ``*.Err``."""
    if expected == actual:
        return True
    if "." in expected and "." in actual:
        return False
    return expected.rsplit(".", 1)[-1] == actual.rsplit(".", 1)[-1]


def resolve_path(value: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` at a dot path; digits (or ``-1``) index lists."""
    if not path:
        return True, value
    current = value
    for part in path.split("."):
        if isinstance(current, dict):
            if part not in current:
                return False, None
            current = current[part]
        elif isinstance(current, list):
            try:
                current = current[int(part)]
            except (ValueError, IndexError):
                return False, None
        else:
            return False, None
    return True, current


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_predicate(predicate: Predicate) -> None:
    """Refuse a predicate that can never be evaluated (raises :class:`PredicateError`)."""
    if (
        isinstance(predicate, ResultPredicate)
        and predicate.op in {"gt", "lt"}
        and not (_is_number(predicate.value) or isinstance(predicate.value, str))
    ):
        raise PredicateError(
            f"result predicate {predicate.op} needs a number or a string to compare with, "
            f"got {short(predicate.value)}"
        )
    if isinstance(predicate, SQLInvariant) and not predicate.query.strip():
        raise PredicateError(f"SQL invariant on service {predicate.service!r} has no query")
    if isinstance(predicate, SQLInvariant):
        from sandbox.services.sqlquery import read_statement

        try:
            read_statement(predicate.query)
        except SandboxError as exc:
            raise PredicateError(_named(predicate, exc)) from None


def _compare(op: str, actual: Any, expected: Any) -> tuple[bool, str]:
    """``(holds, why not)`` for a result comparison."""
    if op == "eq":
        return json_equal(actual, expected), ""
    if op == "ne":
        return not json_equal(actual, expected), ""
    if op in {"contains", "not_contains"}:
        if isinstance(actual, str):
            if not isinstance(expected, str):
                return False, f"cannot look for {short(expected)} in a string"
            found = expected in actual
        elif isinstance(actual, list):
            found = any(json_equal(item, expected) for item in actual)
        elif isinstance(actual, dict):
            found = isinstance(expected, str) and expected in actual
        else:
            return False, f"{short(actual)} is not a string, list or object"
        return (found if op == "contains" else not found), ""
    # gt / lt
    comparable = (_is_number(actual) and _is_number(expected)) or (
        isinstance(actual, str) and isinstance(expected, str)
    )
    if not comparable:
        return False, f"cannot compare {short(actual)} with {short(expected)}"
    return (actual > expected if op == "gt" else actual < expected), ""


def _query(kind: str, endpoint: str, query: str, *, sandboxed: bool) -> list[tuple[Any, ...]]:
    from sandbox.services.base import SQLQuery
    from sandbox.services.registry import get_kind

    found = get_kind(kind)
    if not isinstance(found, SQLQuery):
        raise PredicateError(f"the {kind} kind answers no SQL")
    return found.query(endpoint, query, limit=EVIDENCE_ROWS, sandboxed=sandboxed)


def run_sql(kind: str, endpoint: str, query: str) -> list[tuple[Any, ...]]:
    """At most :data:`EVIDENCE_ROWS` rows of ``query`` against a sandbox's service of
    ``kind``, confined by the kind (see :class:`~sandbox.services.base.SQLQuery`)."""
    return _query(kind, endpoint, query, sandboxed=True)


def run_sql_live(kind: str, endpoint: str, query: str) -> list[tuple[Any, ...]]:
    """:func:`run_sql` against a live service (``--fail-if`` at capture): confined by what
    needs nothing made on it."""
    return _query(kind, endpoint, query, sandboxed=False)


def _named(invariant: SQLInvariant, error: Exception, endpoint: str | None = None) -> str:
    """``error`` of ``invariant``, naming it (and where it ran)."""
    where = f" ({redact_endpoint(endpoint)})" if endpoint else ""
    return (
        f"SQL invariant {short(invariant.query, 80)} on service {invariant.service!r}{where}: "
        f"{error}"
    )


def evaluate(
    predicate: Predicate, outcome: ReplayOutcome, *, sql: SQLRunner = run_sql
) -> Evaluation:
    """Whether the failure described by ``predicate`` is present in ``outcome``."""
    check_predicate(predicate)
    if isinstance(predicate, ExceptionPredicate):
        error = outcome.error
        if error is None:
            return Evaluation(False, "the run ended without an exception")
        if not type_name_matches(predicate.type, error.type):
            return Evaluation(False, f"the run raised {error.type}, not {predicate.type}")
        if predicate.message_contains and predicate.message_contains not in error.message:
            return Evaluation(
                False,
                f"{error.type} was raised but its message lacks "
                f"{predicate.message_contains!r}: {short(error.message, 120)}",
            )
        return Evaluation(True, f"raised {error.type}: {short(error.message, 120)}")
    if isinstance(predicate, ResultPredicate):
        if not outcome.has_result:
            why = f"it raised {outcome.error.type}" if outcome.error else "it has no result"
            return Evaluation(False, f"the run produced no final result ({why})")
        where = predicate.path or "result"
        found, value = resolve_path(outcome.result, predicate.path)
        if not found:
            return Evaluation(False, f"{where} does not exist in the result")
        holds, why = _compare(predicate.op, value, predicate.value)
        text = f"{where} = {short(value)} ({predicate.op} {short(predicate.value)})"
        return Evaluation(holds, f"{text}: {why}" if why else text)
    if isinstance(predicate, MarkedPredicate):
        marked, wanted = outcome.marked, predicate.reason_contains
        if marked is None:
            return Evaluation(False, "the run did not mark itself failed")
        if wanted and wanted not in marked:
            detail = f"the run marked itself failed, but not with {wanted!r}"
            return Evaluation(False, f"{detail}: {short(marked, 120)}")
        return Evaluation(True, f"the run marked itself failed: {short(marked, 120)}")
    if isinstance(predicate, ExitCodePredicate):
        code = outcome.effective_exit_code
        holds, _ = _compare(predicate.op, code, predicate.value)
        return Evaluation(holds, f"exit code {code} ({predicate.op} {predicate.value})")
    endpoint = outcome.endpoints.get(predicate.service)
    if endpoint is None:
        raise ReplayError(
            f"SQL invariant needs service {predicate.service!r}, but the replay has "
            f"{', '.join(sorted(outcome.endpoints)) or 'no services'}"
        )
    kind = outcome.kinds.get(predicate.service)
    if kind is None:
        raise ReplayError(
            f"SQL invariant needs service {predicate.service!r}, whose kind is not known"
        )
    try:
        rows = sql(kind, endpoint, predicate.query)
    except SandboxError as exc:
        raise PredicateError(_named(predicate, exc, endpoint)) from None
    if not rows:
        return Evaluation(False, "the SQL invariant returned no rows")
    return Evaluation(True, f"the SQL invariant returned rows, e.g. {short(list(rows[0]))}")


def predicate_for(failure: Failure | None) -> Predicate:
    """The recorded predicate, or else one built from the recorded exception."""
    if failure is not None and failure.predicate is not None:
        return failure.predicate
    if failure is not None and failure.error is not None:
        return ExceptionPredicate(type=failure.error.type)
    raise ReplayError(
        "the snapshot records no failure predicate and no exception: give one to judge by "
        "(sandbox replay --predicate ...)"
    )


@dataclass(frozen=True)
class Expectation:
    """The recorded failure as each replayed run is judged against it: the predicate, and
    the exception that ended the recording (if one did) with the boundary it ended at."""

    predicate: Predicate
    error: ErrorInfo | None = None
    boundary: str | None = None
    calls: tuple[Event, ...] = ()
    """The recorded boundary calls, which a run must exercise to be judged *gone*."""
    raised: frozenset[str] = frozenset()
    """The exception types the recording holds
    (:func:`~sandbox.replay.judging.coverage.raised_types`)."""

    @classmethod
    def of(
        cls, failure: Failure | None, recording: Sequence[Event], predicate: Predicate | None = None
    ) -> Expectation:
        """From a manifest's failure and its event log; ``predicate`` replaces the recorded
        one."""
        ended = ReplayOutcome.from_events(recording)
        return cls(
            predicate or predicate_for(failure),
            ended.error,
            ended.boundary,
            ended.calls,
            raised_types(recording),
        )

    def same_exception(self, outcome: ReplayOutcome) -> bool:
        """The run ended with the recorded exception's type at the recorded boundary."""
        return (
            self.error is not None
            and outcome.error is not None
            and type_name_matches(self.error.type, outcome.error.type)
            and outcome.boundary == self.boundary
        )


Outcome = Literal["reproduced", "gone", "inconclusive"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
EXIT_CODES: dict[Outcome, int] = {"reproduced": 1, "gone": 0, "inconclusive": 2}


@dataclass(frozen=True)
class RunVerdict:
    """One replayed run: *reproduced*, *gone*, or *inconclusive* with a :data:`Reason`."""

    run: int
    outcome: Outcome
    detail: str
    divergence: Divergence | None = None
    reason: Reason | None = None
    """Why the run could not be judged (inconclusive runs only)."""
    coverage: Coverage | None = None
    """How many of the recorded boundary calls the run made
    (:mod:`sandbox.replay.judging.coverage`)."""
    raised: tuple[str, ...] = ()
    """Exceptions replayed calls raised where the recording's did not, in a run that
    completed (so the agent caught them), described with the call."""

    @property
    def reproduced(self) -> bool:
        return self.outcome == "reproduced"

    @property
    def label(self) -> str:
        """``reproduced``, ``gone`` or ``could not judge: <reason>``."""
        if self.outcome != "inconclusive":
            return self.outcome
        return f"could not judge: {REASON_TEXT.get(self.reason or '', 'unknown')}"

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run,
            "outcome": self.outcome,
            "reproduced": self.reproduced,
            "reason": self.reason,
            "detail": self.detail,
            "coverage": self.coverage.to_json() if self.coverage else None,
            "raised": list(self.raised),
            "divergence": self.divergence.to_json() if self.divergence else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunVerdict:
        """A run as :meth:`to_json` wrote it (the divergence is not read back); a run
        without an ``outcome`` (an older writer) counts as reproduced or inconclusive."""
        raw = data.get("outcome")
        outcome: Outcome = (
            next(o for o in OUTCOMES if o == raw)
            if raw in OUTCOMES
            else "reproduced"
            if data.get("reproduced") is True
            else "inconclusive"
        )
        raw_reason = data.get("reason")
        reason: Reason | None = None
        if outcome == "inconclusive":
            reason = next((r for r in REASONS if r == raw_reason), "sandbox")
        raw_coverage = data.get("coverage")
        coverage = (
            Coverage(
                int(raw_coverage["made"]),
                int(raw_coverage["recorded"]),
                tuple(str(s) for s in raw_coverage.get("state") or ()),
            )
            if isinstance(raw_coverage, Mapping)
            else None
        )
        return cls(
            int(data["run"]),
            outcome,
            str(data.get("detail", "")),
            reason=reason,
            coverage=coverage,
            raised=tuple(str(r) for r in data.get("raised") or ()),
        )


def judge_run(
    index: int,
    expected: Expectation,
    outcome: ReplayOutcome,
    *,
    sql: SQLRunner = run_sql,
    environ: Mapping[str, str] | None = None,
) -> RunVerdict:
    """Judge one replayed run. *Reproduced*: the predicate holds (an exception predicate at
    the recorded boundary), or the run ended with the recorded exception's type at the
    recorded boundary. *Gone*: the run completed, every boundary was served, the predicate
    does not hold, and the run exercised the recorded run (it made at least one recorded
    call or read or wrote the restored state, and none of the recorded calls it made raised
    what the recording's did not: see :mod:`sandbox.replay.judging.coverage`). Anything
    else is *inconclusive*, with its reason: a crash is never "gone", and a crash outranks
    a predicate that cannot be checked.
    ``environ`` is the environment the run saw (for hints)."""
    coverage, raised = exercised(
        expected.calls, outcome.calls, expected.raised, state=outcome.state
    )
    if outcome.error is not None:
        raised = ()  # the run ended with it: the verdict names the crash
    run = _judge_end(index, expected, outcome, sql=sql, environ=environ)
    env = os.environ if environ is None else environ
    named = tuple(
        f"{explain(r.error, env).describe(r.error)} raised by {r.call}"
        + ("" if r.at_recorded else " (a call the recording does not have)")
        for r in raised
    )
    run = replace(run, coverage=coverage, raised=named)
    if outcome.unreached is not None and outcome.timed_out is None:
        return replace(run, outcome="inconclusive", reason="outside", detail=outcome.unreached)
    if run.outcome != "gone":
        return run
    if outcome.before is not None:
        return replace(
            run,
            outcome="inconclusive",
            reason="outside",
            detail=f"{run.detail}, but {outcome.before}, which they may have changed (replay "
            "the run's own function with --entrypoint module:function)",
        )
    at_recorded = [(r, text) for r, text in zip(raised, named, strict=True) if r.at_recorded]
    if at_recorded:
        first, text = at_recorded[0]
        more = f" (and {len(at_recorded) - 1} more)" if len(at_recorded) > 1 else ""
        return replace(
            run,
            outcome="inconclusive",
            reason=explain(first.error, env).reason,
            detail=f"{run.detail}, but the agent caught {text}{more}, where the recorded "
            "call did not raise it: the replay did not do what the capture did there",
        )
    if coverage.nothing:
        return replace(
            run,
            outcome="inconclusive",
            reason="unexercised",
            detail=f"{run.detail}, but the replay exercised nothing of the recorded run "
            f"({coverage.describe()})",
        )
    shown = f"{run.detail} ({coverage.describe()})" if coverage.recorded else run.detail
    if named:
        shown += f"; the agent caught {'; '.join(named)}"
    return replace(run, detail=shown)


def _judge_end(
    index: int,
    expected: Expectation,
    outcome: ReplayOutcome,
    *,
    sql: SQLRunner,
    environ: Mapping[str, str] | None,
) -> RunVerdict:
    """The verdict on how the run ended, before its coverage is weighed (see
    :func:`judge_run`)."""
    div = outcome.divergence

    def inconclusive(reason: Reason, detail: str) -> RunVerdict:
        return RunVerdict(index, "inconclusive", detail, div, reason)

    if outcome.timed_out is not None:
        return inconclusive(
            "timeout", f"{describe_timeout(outcome.timed_out)}: the run was stopped unfinished"
        )
    if outcome.exited is not None:
        return inconclusive(
            "exit",
            f"the agent called os._exit({outcome.exited}), which would have ended the "
            "replay's process there (the recorded run never ended so)",
        )
    if outcome.refused is not None:
        return inconclusive("refused", f"inconclusive: {outcome.refused}")
    if outcome.uncaptured is not None:
        return inconclusive("uncaptured", outcome.uncaptured)
    if outcome.mismatch is not None:
        return inconclusive("mismatch", outcome.mismatch)
    error = outcome.error
    try:
        evaluation = evaluate(expected.predicate, outcome, sql=sql)
    except SandboxError as exc:
        if error is None:
            return inconclusive("sandbox", f"the predicate could not be checked: {exc}")
        # The run crashed: that is why (a predicate over a run that never got there may
        # well fail too), so the crash is what the verdict names.
        evaluation = Evaluation(False, f"the predicate could not be checked: {exc}")
    where = f" after {outcome.boundary}" if outcome.boundary else " before any boundary"
    if (
        evaluation.holds
        and isinstance(expected.predicate, ExitCodePredicate)
        and error is not None
        and not expected.same_exception(outcome)
    ):
        evaluation = Evaluation(False, evaluation.detail)  # the exit code of another crash
    if evaluation.holds:
        if (
            isinstance(expected.predicate, ExceptionPredicate)
            and expected.error is not None
            and type_name_matches(expected.predicate.type, expected.error.type)
            and outcome.boundary != expected.boundary
        ):
            recorded = expected.boundary or "before any boundary"
            return inconclusive(
                "exception",
                f"{evaluation.detail}, but{where}: the recording raised it after {recorded}",
            )
        return RunVerdict(index, "reproduced", evaluation.detail, div)
    if error is not None:
        if not isinstance(
            expected.predicate, ExceptionPredicate | ExitCodePredicate
        ) and expected.same_exception(outcome):
            return RunVerdict(
                index, "reproduced", f"raised {error.type}{where}, as the recording did", div
            )
        why = explain(error, os.environ if environ is None else environ)
        return inconclusive(
            why.reason,
            f"the run ended with {why.describe(error)}{where}, not with the recorded failure",
        )
    if outcome.exit_code:
        return inconclusive(
            "exit",
            f"the command exited with code {outcome.exit_code} and {evaluation.detail}",
        )
    if outcome.stalls and div is None:
        # The run made the recorded calls, yet their recorded order could not be kept: an
        # order-dependent failure may have been missed. (A run that took another path, a
        # fix that calls other tools, stalls too: the recorded order does not apply to it.)
        return inconclusive(
            "order",
            f"{evaluation.detail}, but the recorded order of concurrent calls could not be "
            f"kept ({outcome.stalls} time(s)), so the failure may have been missed",
        )
    return RunVerdict(index, "gone", evaluation.detail, div)


@dataclass(frozen=True)
class Verdict:
    """The N replayed runs, each reproduced, gone or inconclusive; see the module docs for
    :attr:`exit_code`."""

    predicate: Predicate
    runs: tuple[RunVerdict, ...]

    @property
    def total(self) -> int:
        return len(self.runs)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.runs if r.outcome == outcome)

    @property
    def reproduced(self) -> int:
        return self.count("reproduced")

    @property
    def gone(self) -> int:
        return self.count("gone")

    @property
    def inconclusive(self) -> int:
        return self.count("inconclusive")

    @property
    def reproduced_any(self) -> bool:
        return self.reproduced > 0

    @property
    def rate(self) -> float:
        return self.reproduced / self.total if self.runs else 0.0

    @property
    def outcome(self) -> Outcome:
        """*reproduced* in at least one run; else *gone* when every run was judged (and
        there was at least one); else *inconclusive*."""
        if self.reproduced_any:
            return "reproduced"
        if self.runs and self.inconclusive == 0:
            return "gone"
        return "inconclusive"

    @property
    def reasons(self) -> list[str]:
        """Why runs could not be judged, each reason once, as text."""
        found = dict.fromkeys(r.reason for r in self.runs if r.reason)
        return [REASON_TEXT[r] for r in found]

    @property
    def exit_code(self) -> int:
        """1 reproduced (in at least one run), 0 gone (every run judged), 2 inconclusive."""
        return EXIT_CODES[self.outcome]

    @property
    def coverage(self) -> Coverage | None:
        """The least-covering run's coverage (``None`` when the recording made no calls)."""
        found = [r.coverage for r in self.runs if r.coverage is not None and r.coverage.recorded]
        return min(found, key=lambda c: c.made) if found else None

    def summary(self) -> str:
        head = {
            "reproduced": "failure reproduced",
            "gone": "failure gone",
            "inconclusive": "could not judge",
        }[self.outcome]
        counts = f"{self.gone} gone, {self.inconclusive} inconclusive"
        if self.reasons:
            counts += f": {', '.join(self.reasons)}"
        runs = f"{self.reproduced}/{self.total} runs"
        if not self.reproduced_any:
            runs += " reproduced"
        made = sorted({r.coverage.made for r in self.runs if r.coverage and r.coverage.recorded})
        covered = ""
        if made and self.coverage is not None:
            span = str(made[0]) if len(made) == 1 else f"{made[0]}-{made[-1]}"
            covered = f"; recorded calls made: {span}/{self.coverage.recorded}"
        return f"{head}: {runs} ({counts}){covered}"

    def to_json(self) -> dict[str, object]:
        return {
            "predicate": self.predicate.model_dump(mode="json"),
            "outcome": self.outcome,
            "reproduced": self.reproduced,
            "gone": self.gone,
            "inconclusive": self.inconclusive,
            "reasons": self.reasons,
            "total": self.total,
            "coverage": self.coverage.to_json() if self.coverage else None,
            "exit_code": self.exit_code,
            "runs": [r.to_json() for r in self.runs],
        }


def judge(
    expected: Expectation | Predicate,
    outcomes: Iterable[ReplayOutcome],
    *,
    sql: SQLRunner = run_sql,
    environ: Mapping[str, str] | None = None,
) -> Verdict:
    """Judge every outcome (:func:`judge_run`) and aggregate."""
    exp = expected if isinstance(expected, Expectation) else Expectation(expected)
    runs = tuple(
        judge_run(i, exp, outcome, sql=sql, environ=environ) for i, outcome in enumerate(outcomes)
    )
    return Verdict(exp.predicate, runs)
