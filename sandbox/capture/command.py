"""Capture an unmodified program: ``sandbox capture --name N -- python agent.py``.

The run is created here; the program runs as a child process with the capture hook (see
:mod:`sandbox.capture.hook`) and appends its events; its output goes where ours goes and its
exit code is kept. A non-zero exit marks the run failed, with the exception that ended the
program as the predicate when the hook saw it. A program that cannot be run exits as a shell
says: :data:`NOT_FOUND` (127) when there is no such program, :data:`CANNOT_EXECUTE` (126)
when it cannot be executed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.capture.children import ENV_VAR, child_settings, hook_environment
from sandbox.capture.discovery import check_mode, check_state_mode
from sandbox.capture.recorder import BLOB_THRESHOLD
from sandbox.capture.run import Capture, finish_manifest
from sandbox.capture.scrub import redact_manifest
from sandbox.errors import CaptureError
from sandbox.redaction import RedactionConfig
from sandbox.snapshot.events import Event, FinalResult
from sandbox.snapshot.manifest import (
    Entrypoint,
    ExceptionPredicate,
    ExitCodePredicate,
    Failure,
    Manifest,
    Predicate,
    marked_failure,
)
from sandbox.snapshot.store import Store, parse_events

NOT_FOUND = 127
"""The exit code of a program that was not found (as a shell gives it)."""
CANNOT_EXECUTE = 126
"""The exit code of a program that was found but cannot be executed (not executable, not
a program)."""

Judge = Callable[[Predicate, Manifest, Sequence[Event], int], tuple[bool, str]]
"""``(predicate, manifest, events, exit code) -> (holds, detail)``: checks a ``--fail-if``
predicate against a finished capture (given by the replay layer, which judges predicates)."""


@dataclass(frozen=True)
class CommandResult:
    run_id: str
    exit_code: int
    manifest: Manifest
    not_run: str | None = None
    """Why the program did not run (not found, cannot be executed); ``None`` when it ran."""

    @property
    def failed(self) -> bool:
        return self.manifest.failure is not None and self.manifest.failure.observed


def child_environment(base: Mapping[str, str], settings: str) -> dict[str, str]:
    env = dict(base)
    env[ENV_VAR] = settings
    return hook_environment(env)


def capture_command(
    command: Sequence[str],
    *,
    name: str,
    store: Store,
    seed: int | None = None,
    redaction: RedactionConfig | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    run_id: str | None = None,
    blob_threshold: int = BLOB_THRESHOLD,
    services: str = "auto",
    state: str = "whole",
    fail_if: Predicate | None = None,
    judge: Judge | None = None,
    **popen: Any,
) -> CommandResult:
    """Run ``command`` with capture on; return its exit code and the finished manifest.
    ``services`` is ``auto`` (capture each service the program connects to) or ``none``
    (record the endpoints only): see :mod:`sandbox.capture.discovery`. ``state`` is
    ``whole`` or ``touched`` (a service whose kind can keeps only the part of its state the
    program touched: see :class:`~sandbox.services.base.TouchedCapture`).
    Extra keyword arguments go to :func:`subprocess.run` (``stdout``, ``stderr``, ``timeout``).

    ``fail_if`` is the failure predicate of the run: ``judge`` (required with it) says
    whether it held when the program ended, which marks the run failed
    (:func:`sandbox.replay.judging.failif.capture_failing_if` gives both)."""
    if fail_if is not None and judge is None:
        raise CaptureError("a --fail-if predicate needs a judge to check it at capture")
    if not command:
        raise CaptureError("nothing to capture: give the command after --")
    state_mode, services_mode = check_state_mode(state), check_mode(services)
    base = os.environ.copy() if environ is None else dict(environ)
    capture = Capture(
        name,
        store=store,
        seed=seed,
        run_id=run_id,
        redaction=redaction or RedactionConfig(),
        environ=base,
        cwd=cwd,
        entrypoint=Entrypoint(kind="command", command=list(command), cwd=cwd or os.getcwd()),
        blob_threshold=blob_threshold,
    )
    store, writer, redactor, run_seed = capture.begin()
    writer.close()  # the child appends; we only finish the manifest
    run = writer.manifest.run_id
    env = child_environment(
        base,
        child_settings(
            store,
            run,
            run_seed,
            capture.redaction,
            blob_threshold,
            services_mode,
            state=state_mode,
        ),
    )
    not_run: str | None = None
    try:
        done = subprocess.run(list(command), env=env, cwd=cwd, check=False, **popen)
        code = done.returncode
    except FileNotFoundError:
        code, not_run = NOT_FOUND, f"no program {command[0]!r}"
    except OSError as exc:
        code, not_run = CANNOT_EXECUTE, f"cannot execute {command[0]!r}: {exc.strerror or exc}"
    if code < 0:  # killed by a signal, as a shell reports it
        code = 128 - code
    manifest = store.load_manifest(run)  # the child added its seeds and services
    events = parse_events(store.read_events_bytes(run), allow_torn_tail=True)
    if fail_if is not None and judge is not None:
        failure: Failure | None = _judged(fail_if, judge(fail_if, manifest, events, code), events)
    elif not_run is not None:
        failure = Failure(reason=f"exit code {code}: {not_run}")
    else:
        failure = _failure(events, code)
    writer.manifest = manifest
    finished = finish_manifest(
        store,
        redact_manifest(manifest.model_copy(update={"failure": failure}), redactor),
        writer,
        exit_code=code,
    )
    return CommandResult(run, code, finished, not_run)


def _judged(predicate: Predicate, held: tuple[bool, str], events: Sequence[Event]) -> Failure:
    """The failure a ``--fail-if`` predicate describes: observed when it held."""
    holds, detail = held
    final = next((e for e in reversed(events) if isinstance(e, FinalResult)), None)
    return Failure(
        observed=holds,
        reason=f"{'' if holds else 'not observed: '}{detail}"[:500],
        predicate=predicate,
        error=final.error if final is not None else None,
    )


def _failure(events: Sequence[Event], code: int) -> Failure | None:
    """The failure the child marked, else the exception that ended it, else its exit code."""
    marked = marked_failure(events)
    if marked is not None:
        return marked
    if code == 0:
        return None
    for event in reversed(events):
        if isinstance(event, FinalResult) and event.error is not None:
            err = event.error
            return Failure(
                reason=f"exit code {code}: {err.type}: {err.message}"[:500],
                predicate=ExceptionPredicate(
                    type=err.type, message_contains=err.message[:200] or None
                ),
                error=err,
            )
    # judged on replay by the same exit code (the run records nothing else it failed by)
    return Failure(reason=f"exit code {code}", predicate=ExitCodePredicate(op="eq", value=code))
