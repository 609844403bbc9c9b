"""Replay of a run captured from a command (``sandbox capture --name N -- python agent.py``).

The engine creates the replayed run and starts the recorded command again (in the recorded
working directory when it still exists, else the current one), with the environment of the
replay (the current one, bindings of the restored services included) and three variables
that switch the capture hook's ``sitecustomize`` to replay:

* ``SANDBOX_REPLAY_OF``: the run being replayed;
* ``SANDBOX_REPLAY_RUN_ID``: the run the replay is recorded as (created by the parent);
* ``SANDBOX_REPLAY_OPTIONS``: JSON with the store, the policies, the miss mode, order
  enforcement, the clock mode, and the file the child writes its :class:`Served` to.

In the child, :func:`start_from_env` opens a :class:`~sandbox.replay.session.ReplaySession`
(the same one the in-process replay uses; for a run the program opened itself with
``capture.run``, its recording begins where the program enters ``capture.run`` again, as
the capture's did, so what the program drew before, as it imported, is not the run's
either; a run labelled with its place among the program's blocks is that block alone, and
the program ends with it: :mod:`sandbox.replay.window`), records the exception that ends
the program as a capture does, and at exit writes what the boundary saw for the parent,
which then judges the run exactly as an in-process one. The variables are removed from
the program's environment; its own Python children replay their recorded tasks into the
same run (:mod:`sandbox.capture.children`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from sandbox.capture.children import ENV_VAR as CAPTURE_VAR
from sandbox.capture.children import ChildWriter, events_of_child, hook_environment
from sandbox.capture.hook import record_uncaught
from sandbox.errors import ReplayError
from sandbox.names import OPENED_IN_PROGRAM, OPENED_LABEL
from sandbox.replay.boundary import ReplayStopped
from sandbox.replay.session import (
    OF_VAR,
    OPTIONS_VAR,
    RUN_VAR,
    ReplayOptions,
    ReplaySession,
    Served,
    replay_variables,
)
from sandbox.replay.window import Labelled
from sandbox.snapshot.manifest import Entrypoint, Manifest
from sandbox.snapshot.store import RunWriter, Store, open_store


def recorded_command(manifest: Manifest, override: str | None) -> Entrypoint | None:
    """The recorded command to run again, with a working directory that exists; ``None``
    when the run is replayed in-process (an ``entrypoint`` override, or a callable)."""
    entry = manifest.entrypoint
    if override or entry is None or entry.kind != "command" or not entry.command:
        return None
    cwd = entry.cwd if entry.cwd and os.path.isdir(entry.cwd) else os.getcwd()
    return entry.model_copy(update={"cwd": cwd})


def child_environment(
    base: Mapping[str, str],
    *,
    store: Store,
    original: str,
    run_id: str,
    options: ReplayOptions,
    result: Path,
) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k != CAPTURE_VAR}
    env.update(replay_variables(store, original, run_id, options, result=str(result)))
    return hook_environment(env)


def run_command(
    entry: Entrypoint,
    *,
    writer: RunWriter,
    store: Store,
    original: str,
    options: ReplayOptions,
    timeout: float | None = None,
) -> Served:
    """Run the recorded command as a replay of ``original`` recorded through ``writer`` (which
    is closed: the child appends); return what the child's boundary saw and its exit code.
    After ``timeout`` seconds the command's whole process group is killed and the run is
    marked as stopped there (``Served.timed_out``)."""
    writer.close()
    run_id = writer.manifest.run_id
    with tempfile.TemporaryDirectory(prefix="sandbox-replay-") as tmp:
        result = Path(tmp) / "served.json"
        env = child_environment(
            os.environ,
            store=store,
            original=original,
            run_id=run_id,
            options=options,
            result=result,
        )
        code, timed_out = _run_group(entry, env, timeout)
        exit_code = code if code >= 0 else 128 - code  # killed by a signal, as a shell says
        if timed_out:
            writer.manifest = store.load_manifest(run_id)
            return Served(exit_code=exit_code, timed_out=timeout)
        if not result.exists():
            raise ReplayError(
                f"the replay did not start in the recorded command ({' '.join(entry.command)}; "
                f"exit code {exit_code}): is it a Python program of this environment? "
                "See its output above."
            )
        served = Served.from_json(json.loads(result.read_text(encoding="utf-8")))
    served.exit_code = exit_code
    writer.manifest = store.load_manifest(run_id)  # the child added its seeds
    return served


def _run_group(
    entry: Entrypoint, env: Mapping[str, str], timeout: float | None
) -> tuple[int, bool]:
    """Run the command in a process group of its own; ``(return code, timed out)``. The
    group (the program and its children) is killed when ``timeout`` passes, or when the
    replay itself is interrupted."""
    try:
        proc = subprocess.Popen(list(entry.command), env=env, cwd=entry.cwd, process_group=0)
    except OSError as exc:
        raise ReplayError(f"cannot run the recorded command {entry.command[0]!r}: {exc}") from None
    timed_out = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, timed_out


def start_from_env(environ: MutableMapping[str, str] | None = None) -> ReplaySession | None:
    """In a replayed command: replay into the run named by the variables; ``None`` when
    they are unset."""
    env = os.environ if environ is None else environ
    original = env.pop(OF_VAR, None)
    run_id = env.pop(RUN_VAR, None)
    raw = env.pop(OPTIONS_VAR, None)
    if not original or not run_id or not raw:
        return None
    settings = json.loads(raw)
    store = open_store(settings["store"])
    options = ReplayOptions.from_json(settings)
    task = settings.get("task")
    if task:  # a child of the replayed program: its recorded task, adopted by the parent
        session = ReplaySession(
            ChildWriter(Path(settings["events"]), store.load_manifest(run_id)),
            store,
            store.load_manifest(original),
            events_of_child(store.load_events(original), task),
            options,
            follow=False,
        )
        atexit.register(session.close)
        return session
    result = Path(settings["result"])
    writer = store.resume(run_id)
    manifest = store.load_manifest(original)
    session = ReplaySession(
        writer,
        store,
        manifest,
        store.load_events(original),
        options,
        at_hand_over=manifest.labels.get(OPENED_LABEL) == OPENED_IN_PROGRAM,
        block=Labelled.of(manifest.labels),
    )
    rec = session.rec

    def stopped(exc: BaseException) -> bool:
        if isinstance(exc, ReplayStopped):
            sys.stderr.write(f"sandbox: replay stopped: {exc}\n")
            return True
        return False

    record_uncaught(rec, stopped)

    def at_exit() -> None:
        try:
            session.close()
        finally:
            data = json.dumps(session.served().to_json(), default=repr)
            result.write_text(data, encoding="utf-8")

    def window_closed() -> None:
        # The run's block ended: so does the replay of the program (what it would do next
        # is not the run's). Its output is flushed; its exit handlers do not run.
        at_exit()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)

    atexit.register(at_exit)
    if not rec.window.every_block:
        rec.window.on_close = window_closed
    return session
