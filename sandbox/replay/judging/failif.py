"""Capture an unmodified program whose failure a predicate describes::

    sandbox capture --name sync \\
        --fail-if 'sql:postgres=SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1' \\
        -- python sync.py

The predicate (:mod:`sandbox.snapshot.predicate_syntax`) becomes the run's failure
predicate. It is checked when the program has ended, exactly as a replay checks it (the exit
code, the exception that ended the program, its final result, or a read-only query against a
service the capture found: ``postgres``, ``postgres-2`` ... by kind), and the run is marked
failed when it holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox.capture.command import CommandResult, Judge, capture_command
from sandbox.errors import SandboxError
from sandbox.replay.judging.verdict import (
    ReplayOutcome,
    SQLRunner,
    check_predicate,
    evaluate,
    run_sql_live,
)
from sandbox.snapshot.events import Event
from sandbox.snapshot.manifest import Manifest, Predicate, SQLInvariant


def live_endpoints(manifest: Manifest, environ: Mapping[str, str]) -> dict[str, str]:
    """Service name → the endpoint the program used: the value of its variable, else the
    recorded one."""
    found = {}
    for state in manifest.services:
        value = environ.get(state.binding.env) if state.binding.env else None
        endpoint = value or state.binding.value
        if endpoint:
            found[state.name] = endpoint
    return found


def predicate_judge(
    environ: Mapping[str, str] | None = None, *, sql: SQLRunner = run_sql_live
) -> Judge:
    """A judge for :func:`capture_command`: the predicate against the finished capture; SQL
    invariants run against the services it found, as the program reached them: live
    databases, which an invariant only reads (one statement, a read-only transaction, a
    time limit; see :class:`~sandbox.services.base.SQLQuery`)."""
    env = os.environ if environ is None else environ

    def judge(
        predicate: Predicate, manifest: Manifest, events: Sequence[Event], exit_code: int
    ) -> tuple[bool, str]:
        endpoints = live_endpoints(manifest, env)
        if isinstance(predicate, SQLInvariant) and predicate.service not in endpoints:
            found = ", ".join(sorted(endpoints)) or "none"
            return False, f"no service {predicate.service!r} was found (found: {found})"
        kinds = {s.name: s.kind for s in manifest.services}
        outcome = ReplayOutcome.from_events(
            events, endpoints=endpoints, kinds=kinds, exit_code=exit_code
        )
        try:
            held = evaluate(predicate, outcome, sql=sql)
        except SandboxError as exc:
            return False, f"the predicate could not be checked: {exc}"
        return held.holds, held.detail

    return judge


def capture_failing_if(
    command: Sequence[str],
    predicate: Predicate | None,
    *,
    sql: SQLRunner = run_sql_live,
    **options: Any,
) -> CommandResult:
    """:func:`~sandbox.capture.command.capture_command` with ``predicate`` as the failure
    predicate, checked when the program ends (``None``: as without one)."""
    if predicate is None:
        return capture_command(command, **options)
    check_predicate(predicate)
    environ = options.get("environ")
    return capture_command(
        command, fail_if=predicate, judge=predicate_judge(environ, sql=sql), **options
    )
