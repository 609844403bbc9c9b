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
- :class:`~sandbox.snapshot.manifest.SQLInvariant`: the query, run read-only against the
  named service of the replay, returns at least one row.

**Exit code.** ``sandbox replay`` exits with :attr:`Verdict.exit_code`: **1 when the failure
reproduced** in at least one of the N runs (the bug is present), **0 when it reproduced in
none** (the bug is absent or fixed), and the CLI's usual 2 when the replay could not be judged
(a :class:`~sandbox.errors.SandboxError`). A regression test for a fixed bug therefore asserts
``verdict.exit_code == 0`` (``not verdict.reproduced_any``); a reproduction case before the fix
asserts 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sandbox.errors import PredicateError, ReplayError
from sandbox.replay.divergence import Divergence
from sandbox.replay.jsondiff import json_equal, short
from sandbox.snapshot.events import ErrorInfo, Event, FinalResult
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    Failure,
    Predicate,
    ResultPredicate,
    SQLInvariant,
)

SQLRunner = Callable[[str, str], Sequence[tuple[Any, ...]]]
"""``(endpoint, query) -> rows`` (a few at most): how an :class:`SQLInvariant` is checked."""

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
    divergence: Divergence | None = None

    @classmethod
    def from_events(
        cls,
        events: Sequence[Event],
        *,
        endpoints: Mapping[str, str] | None = None,
        divergence: Divergence | None = None,
    ) -> ReplayOutcome:
        """The outcome recorded by the last ``result`` event of a replayed log."""
        final = next((e for e in reversed(events) if isinstance(e, FinalResult)), None)
        return cls(
            error=final.error if final else None,
            result=final.value if final else None,
            has_result=final is not None and final.error is None,
            endpoints=dict(endpoints or {}),
            divergence=divergence,
        )


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


def run_sql(endpoint: str, query: str) -> list[tuple[Any, ...]]:
    """Run ``query`` in a read-only transaction; return at most :data:`EVIDENCE_ROWS` rows."""
    import psycopg

    try:
        with psycopg.connect(endpoint, connect_timeout=10, autocommit=False) as conn:
            conn.read_only = True
            with conn.cursor() as cur:
                cur.execute("SET LOCAL statement_timeout = 30000")
                # The query is data from the snapshot; it runs read-only in the sandbox.
                cur.execute(query)  # type: ignore[arg-type,unused-ignore]
                if cur.description is None:
                    raise PredicateError(f"SQL invariant returns no rows to check: {query!r}")
                return list(cur.fetchmany(EVIDENCE_ROWS))
    except psycopg.Error as exc:
        raise PredicateError(
            f"SQL invariant failed against {redact_endpoint(endpoint)}: "
            f"{type(exc).__name__}: {str(exc).strip()}"
        ) from None


def redact_endpoint(endpoint: str) -> str:
    """The endpoint without its password."""
    parts = urlsplit(endpoint)
    if parts.password is None:
        return endpoint
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


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
    endpoint = outcome.endpoints.get(predicate.service)
    if endpoint is None:
        raise ReplayError(
            f"SQL invariant needs service {predicate.service!r}, but the replay has "
            f"{', '.join(sorted(outcome.endpoints)) or 'no services'}"
        )
    rows = sql(endpoint, predicate.query)
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
        "the snapshot records no failure predicate and no exception: give one to judge by"
    )


@dataclass(frozen=True)
class RunVerdict:
    run: int
    reproduced: bool
    detail: str
    divergence: Divergence | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run,
            "reproduced": self.reproduced,
            "detail": self.detail,
            "divergence": self.divergence.to_json() if self.divergence else None,
        }


@dataclass(frozen=True)
class Verdict:
    """The failure reproduced k times out of N; see the module docs for :attr:`exit_code`."""

    predicate: Predicate
    runs: tuple[RunVerdict, ...]

    @property
    def total(self) -> int:
        return len(self.runs)

    @property
    def reproduced(self) -> int:
        return sum(1 for r in self.runs if r.reproduced)

    @property
    def reproduced_any(self) -> bool:
        return self.reproduced > 0

    @property
    def rate(self) -> float:
        return self.reproduced / self.total if self.runs else 0.0

    @property
    def exit_code(self) -> int:
        """1 when the failure reproduced at least once (bug present), else 0."""
        return 1 if self.reproduced_any else 0

    def summary(self) -> str:
        word = "reproduced" if self.reproduced_any else "did not reproduce"
        return f"failure {word}: {self.reproduced}/{self.total} runs"

    def to_json(self) -> dict[str, object]:
        return {
            "predicate": self.predicate.model_dump(mode="json"),
            "reproduced": self.reproduced,
            "total": self.total,
            "exit_code": self.exit_code,
            "runs": [r.to_json() for r in self.runs],
        }


def judge(
    predicate: Predicate, outcomes: Iterable[ReplayOutcome], *, sql: SQLRunner = run_sql
) -> Verdict:
    """Evaluate ``predicate`` on every outcome and aggregate."""
    runs = []
    for i, outcome in enumerate(outcomes):
        result = evaluate(predicate, outcome, sql=sql)
        runs.append(RunVerdict(i, result.holds, result.detail, outcome.divergence))
    return Verdict(predicate, tuple(runs))
