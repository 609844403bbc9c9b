"""Capture inside a child process started by :func:`sandbox.capture.command.capture_command`.

The parent creates the run and starts the program with ``$SANDBOX_CAPTURE`` (JSON: store,
run id, seed, redaction) and a ``sitecustomize`` on ``PYTHONPATH``; at interpreter start that
calls :func:`start_from_env`, which appends events to the parent's run: HTTP and model calls,
seeds, uuid draws, the services the program connects to (captured with ``--services auto``,
their end states at exit) and the exception that ends the program (``sys.excepthook``). The
variable is removed from the environment; the program's own Python children are captured into
the same run by :mod:`sandbox.capture.children`.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import os
import sys
import threading
from collections.abc import Callable, MutableMapping
from pathlib import Path
from types import TracebackType
from typing import Any

from sandbox.capture.children import ENV_VAR, ChildWriter, follow_captured_children
from sandbox.capture.clients import Connect
from sandbox.capture.clients import install as install_clients
from sandbox.capture.discovery import Discovery, check_mode, check_state_mode
from sandbox.capture.recorder import Recorder
from sandbox.redaction import RedactionConfig, Redactor
from sandbox.seam import boundary
from sandbox.snapshot.store import open_store


def record_uncaught(
    recorder: Recorder, stop: Callable[[BaseException], bool] | None = None
) -> None:
    """Record the exception that ends the program (through ``sys.excepthook``), then let the
    previous hook print it. ``stop(exc)`` returning true handles the exception instead."""
    original_hook = sys.excepthook

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        if stop is not None and stop(exc):
            return
        try:
            recorder.flush_pending()
            recorder.record_exception(exc)
        except Exception:  # the program's own error matters more than ours
            pass
        original_hook(exc_type, exc, tb)

    sys.excepthook = excepthook


def start_from_env(environ: MutableMapping[str, str] | None = None) -> Recorder | None:
    """Start capturing into the run named by ``$SANDBOX_CAPTURE``; ``None`` when unset."""
    from sandbox.capture.run import start_recording
    from sandbox.capture.scrub import seal

    env = os.environ if environ is None else environ
    raw = env.pop(ENV_VAR, None)
    if not raw:
        return None
    settings: dict[str, Any] = json.loads(raw)
    store = open_store(settings["store"])
    run_id = str(settings["run_id"])
    manifest = store.load_manifest(run_id)
    events = settings.get("events")
    writer = ChildWriter(Path(events), manifest) if events else store.resume(run_id)
    config = RedactionConfig.from_json(settings.get("redaction", {}))
    redactor = Redactor(config, dict(env), store.placeholder_key())
    threshold = int(settings.get("blob_threshold", 65536))
    recorder = Recorder(writer, store, redactor=redactor, blob_threshold=threshold)
    importlib.import_module("concurrent.futures.thread")
    boundary.install(recorder)
    reports = settings.get("services_socket")
    if events and reports:  # a child: the program's capture finds what it opens
        install_clients(functools.partial(_reported, str(reports)))
    discovery = Discovery(
        writer,
        store,
        redactor,
        mode=check_mode(str(settings.get("services", "none"))),
        environ=dict(env),
        state=check_state_mode(str(settings.get("state", "whole"))),
    )
    stop_discovery = discovery.install() if not (events and reports) else lambda: None
    start_recording(recorder, int(settings["seed"]))
    if events:  # a child: the parent adopts its events, finishes and seals the run
        atexit.register(_close, recorder)
        return recorder
    follow_captured_children(recorder, int(settings["seed"]), config, threshold, discovery)
    record_uncaught(recorder)

    def end_states() -> None:
        stop_discovery()
        if not discovery.endpoints:
            return
        services = discovery.end_states()
        writer.update_manifest(writer.manifest.model_copy(update={"services": services}))

    # Before the interpreter shuts its thread pools down (which the dumps use): these hooks
    # run last registered first, so ``concurrent.futures`` registered its own one first
    # (imported above, before the ids are patched).
    getattr(threading, "_register_atexit", atexit.register)(end_states)

    def at_exit() -> None:
        try:
            recorder.flush_pending()
        finally:
            recorder.closed = True
            writer.close()
        seal(recorder)

    atexit.register(at_exit)
    return recorder


def _reported(path: str, connect: Connect) -> str:
    """A child's connection, found and captured by the program's capture (see
    ``_site/_sandbox_report.py``)."""
    from sandbox.capture._site._sandbox_report import report

    return report(path, connect.kind, connect.client, connect.endpoint, connect.given)


def _close(recorder: Recorder) -> None:
    try:
        recorder.flush_pending()
    finally:
        recorder.closed = True
        recorder.writer.close()
