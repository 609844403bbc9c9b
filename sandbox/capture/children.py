"""Child Python processes of a captured (or replayed) program, captured into the same run.

A Python child started through :mod:`subprocess` (``subprocess.run([sys.executable,
"fetch.py"])``) gets the capture hook (or, in a replay, the replay hook) in its environment,
with its own task id (``child-1``, ``child-2`` ... in start order) and its own event file.
When it has exited, its events are appended to the parent's log, renumbered, with their
tasks prefixed by the child's (``child-1``, ``child-1:worker-2``) and their spans moved out of
the parent's range. A replayed child replays the recorded events of its task (see
:func:`events_of_child`). Only the program's own children are followed, not theirs.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from sandbox.capture.recorder import Recorder
from sandbox.capture.redact import RedactionConfig
from sandbox.snapshot.events import Event
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import RunWriter, Store, parse_events

ENV_VAR = "SANDBOX_CAPTURE"
"""Starts the capture hook in a process (JSON: :func:`child_settings`)."""
LIVE_VAR = "SANDBOX_REPLAY_LIVE"
"""Marks a process a replay starts live (a stdio MCP server: :mod:`sandbox.replay.liveprocess`):
not the program's child, so not followed."""
SITE_DIR = Path(__file__).parent / "_site"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
SPAN_BLOCK = 1_000_000
"""Child *n*'s spans are moved up by ``n * SPAN_BLOCK``."""
_PYTHON = re.compile(r"python[0-9.]*(\.exe)?")

ChildEnv = Callable[[str, str], Mapping[str, str]]
"""``(task, events file) -> variables`` that start the hook in the child."""
Adopt = Callable[[Sequence[Event]], None]
"""Appends events (renumbered) to the parent's log."""


def is_python(args: Any) -> bool:
    """Whether ``args`` (``subprocess`` style) starts a Python interpreter."""
    if isinstance(args, str | bytes | os.PathLike):
        return False  # a shell line or a bare program: not followed
    try:
        first = os.fsdecode(next(iter(args)))
    except (StopIteration, TypeError):
        return False
    return first == sys.executable or _PYTHON.fullmatch(os.path.basename(first)) is not None


def child_task(n: int) -> str:
    return f"child-{n}"


def adopted(events: Sequence[Event], task: str, n: int) -> list[Event]:
    """A child's events as the parent's log holds them (task prefixed, spans moved up)."""
    offset = n * SPAN_BLOCK
    out = []
    for e in events:
        update: dict[str, Any] = {"task": task if e.task == "main" else f"{task}:{e.task}"}
        if e.span is not None:
            update["span"] = e.span + offset
        if e.parent_span is not None:
            update["parent_span"] = e.parent_span + offset
        out.append(e.model_copy(update=update))
    return out


def events_of_child(recording: Sequence[Event], task: str) -> list[Event]:
    """The recorded events of child ``task`` as the child saw them (the inverse of
    :func:`adopted`)."""
    n = int(task.rsplit("-", 1)[1])
    offset = n * SPAN_BLOCK
    out = []
    for e in recording:
        if e.task != task and not e.task.startswith(task + ":"):
            continue
        update: dict[str, Any] = {"task": e.task[len(task) + 1 :] or "main"}
        if e.span is not None:
            update["span"] = e.span - offset
        if e.parent_span is not None:
            update["parent_span"] = e.parent_span - offset
        out.append(e.model_copy(update=update))
    return out


class ChildWriter(RunWriter):
    """A child's writer: events go to its own file; the manifest stays the parent's."""

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.folder = path.parent
        self.manifest = manifest
        self._file: IO[bytes] = open(path, "ab", buffering=0)  # noqa: SIM115

    def update_manifest(self, manifest: Manifest, *, durable: bool = True) -> None:
        self.manifest = manifest


def follow_children(child_env: ChildEnv, adopt: Adopt) -> Callable[[], None]:
    """Start every Python child of this process with ``child_env(task, file)`` added to its
    environment (and the hook on its path); adopt its events when it has been waited for
    (``subprocess.run``, ``Popen.wait``, ``communicate``, ``with Popen(...)``). Return the
    undo."""
    counter = itertools.count(1)
    folder = Path(tempfile.mkdtemp(prefix="sandbox-children-"))
    original_init = subprocess.Popen.__init__
    original_wait = subprocess.Popen.wait

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if is_python(args) and LIVE_VAR not in (kwargs.get("env") or {}):
            n = next(counter)
            task = child_task(n)
            path = folder / f"{task}.jsonl"
            base = kwargs.get("env")
            env = dict(os.environ if base is None else base)
            env.update(child_env(task, str(path)))
            kwargs["env"] = hook_environment(env)
            self.__dict__["_sandbox_child"] = (task, n, path)
        original_init(self, args, *rest, **kwargs)

    def wait(self: subprocess.Popen[Any], timeout: float | None = None) -> int:
        code = original_wait(self, timeout)
        child = self.__dict__.pop("_sandbox_child", None)
        if child is not None:
            task, n, path = child
            if path.exists():
                events = parse_events(path.read_bytes(), allow_torn_tail=True)
                adopt(adopted(events, task, n))
                path.unlink()
        return code

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen.wait = wait  # type: ignore[method-assign]

    def undo() -> None:
        if subprocess.Popen.__init__ is init:
            subprocess.Popen.__init__ = original_init  # type: ignore[method-assign]
        if subprocess.Popen.wait is wait:
            subprocess.Popen.wait = original_wait  # type: ignore[method-assign]
        shutil.rmtree(folder, ignore_errors=True)

    return undo


def hook_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the hook's ``sitecustomize`` and this package first on ``PYTHONPATH``
    (capture and the replay of a command share the hook)."""
    paths = [str(SITE_DIR), str(PACKAGE_ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def child_settings(
    store: Store,
    run_id: str,
    seed: int,
    redaction: RedactionConfig,
    blob_threshold: int,
    services: str = "none",
    **child: str,
) -> str:
    """``$SANDBOX_CAPTURE`` for a captured program; for a child of one (``task``, ``events``:
    see :mod:`sandbox.capture.children`)."""
    return json.dumps(
        {
            "store": store.location,
            "run_id": run_id,
            "seed": seed,
            "redaction": redaction.to_json(),
            "blob_threshold": blob_threshold,
            "services": services,
            **child,
        }
    )


def follow_captured_children(
    recorder: Recorder, seed: int, redaction: RedactionConfig, blob_threshold: int
) -> Callable[[], None]:
    """Capture this program's Python children into its run; return the undo."""

    def child_env(task: str, events: str) -> dict[str, str]:
        settings = child_settings(
            recorder.store,
            recorder.run_id,
            seed,
            redaction,
            blob_threshold,
            task=task,
            events=events,
        )
        return {ENV_VAR: settings}

    return follow_children(child_env, recorder.adopt)
