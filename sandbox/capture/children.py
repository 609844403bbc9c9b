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

import contextlib
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from sandbox.capture.clients import Connect, Router, unseen
from sandbox.capture.recorder import Recorder
from sandbox.capture.shared import Shared
from sandbox.redaction import RedactionConfig
from sandbox.seam import boundary
from sandbox.snapshot.events import Event
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import RunWriter, Store, parse_events

ENV_VAR = "SANDBOX_CAPTURE"
"""Starts the capture hook in a process (JSON: :func:`child_settings`)."""
LIVE_VAR = "SANDBOX_REPLAY_LIVE"
"""Marks a process a replay starts live (a stdio MCP server:
:mod:`sandbox.replay.isolation.liveprocess`): not the program's child, so not followed."""
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


def is_python_program(args: Any) -> bool:
    """Whether ``args`` starts a Python interpreter or a Python script (a venv's console
    script, ``#!/path/to/venv/bin/python``, as an MCP server installed on its own is)."""
    if is_python(args):
        return True
    if isinstance(args, str | bytes | os.PathLike):
        return False
    try:
        first = os.fsdecode(next(iter(args)))
        program = first if os.sep in first else shutil.which(first)
        if program is None:
            return False
        with open(program, "rb") as file:
            line = file.readline(256)
    except (StopIteration, TypeError, OSError, ValueError):
        return False
    if not line.startswith(b"#!"):
        return False
    words = line[2:].decode(errors="replace").split()
    names = [os.path.basename(w) for w in words[:2]]
    return any(_PYTHON.fullmatch(n) is not None for n in names)


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


class _Follower:
    """The children of one run (or replay): their numbering, their event files."""

    def __init__(self, child_env: ChildEnv, adopt: Adopt, followed: Callable[[Any], bool]) -> None:
        self.child_env = child_env
        self.adopt = adopt
        self.followed = followed
        self.counter = itertools.count(1)
        self._folder: Path | None = None

    @property
    def folder(self) -> Path:
        if self._folder is None:  # made for the first child only: a run costs nothing more
            self._folder = Path(tempfile.mkdtemp(prefix="sandbox-children-"))
        return self._folder

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


_followers: dict[int, _Follower] = {}
"""``id`` of the boundary whose children they are -> its follower."""


def _follower() -> _Follower | None:
    return _followers.get(id(boundary.current()))


def _patch_popen() -> Callable[[], None]:
    original_init = subprocess.Popen.__init__
    original_wait = subprocess.Popen.wait

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        follower = _follower()
        if (
            follower is not None
            and follower.followed(args)
            and LIVE_VAR not in (kwargs.get("env") or {})
        ):
            n = next(follower.counter)
            task = child_task(n)
            path = follower.folder / f"{task}.jsonl"
            base = kwargs.get("env")
            env = os.environ.copy() if base is None else dict(base)
            reads = getattr(boundary.current(), "env_reads", None)
            if reads is not None and base is None:
                reads.update(env)  # the child sees the whole environment: the run read it
            env.update(follower.child_env(task, str(path)))
            kwargs["env"] = hook_environment(env)
            self.__dict__["_sandbox_child"] = (task, n, path, follower)
        original_init(self, args, *rest, **kwargs)

    def wait(self: subprocess.Popen[Any], timeout: float | None = None) -> int:
        code = original_wait(self, timeout)
        child = self.__dict__.pop("_sandbox_child", None)
        if child is not None:
            task, n, path, follower = child
            if path.exists():
                events = parse_events(path.read_bytes(), allow_torn_tail=True)
                follower.adopt(adopted(events, task, n))
                path.unlink()
        return code

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen.wait = wait  # type: ignore[method-assign]

    def undo() -> None:
        if subprocess.Popen.__init__ is init:
            subprocess.Popen.__init__ = original_init  # type: ignore[method-assign]
        if subprocess.Popen.wait is wait:
            subprocess.Popen.wait = original_wait  # type: ignore[method-assign]

    return undo


_POPEN = Shared(_patch_popen)


def follow_children(
    child_env: ChildEnv, adopt: Adopt, followed: Callable[[Any], bool] = is_python
) -> Callable[[], None]:
    """Start every child that the current boundary's context starts (the run's or the
    replay's) and that ``followed(args)`` (a Python interpreter) with ``child_env(task,
    file)`` added to its environment (and the hook on its path); adopt its events when it
    has been waited for (``subprocess.run``, ``Popen.wait``, ``communicate``, ``with
    Popen(...)``). ``subprocess`` is patched once for every run of the process. Return the
    undo."""
    follower = _Follower(child_env, adopt, followed)
    return _POPEN.acquire_for(_followers, id(boundary.current()), follower, follower.close)


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


class ServiceReports:
    """Where the children of a captured program report the services they open (see
    ``_site/_sandbox_report.py``): each connection is routed through the capture's own
    router (:class:`~sandbox.capture.discovery.Discovery`), so that it is found and captured
    into the same run, before the child goes on."""

    def __init__(self, router: Router, path: Path) -> None:
        self.router = router
        self.path = path
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(16)
        threading.Thread(target=self._accept, name="sandbox-service-reports", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                asked = json.loads(conn.makefile("rb").readline())
                given = asked.get("given")
                connect = Connect(
                    kind=str(asked["kind"]),
                    client=str(asked["client"]),
                    endpoint=str(asked["endpoint"]),
                    given=None if given is None else str(given),
                )
                with unseen():  # the router's own connections (the state capture) pass
                    endpoint = self.router(connect)
            except Exception:  # a child's report never breaks the capture or the child
                return
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"endpoint": endpoint}).encode() + b"\n")

    def close(self) -> None:
        self._server.close()


def follow_captured_children(
    recorder: Recorder,
    seed: int,
    redaction: RedactionConfig,
    blob_threshold: int,
    router: Router | None = None,
) -> Callable[[], None]:
    """Capture this program's Python children into its run, and report the services they
    open to ``router`` (the capture's discovery); return the undo. The reports' socket is
    opened when the first child starts: a run that starts none pays nothing for it."""
    children = _CapturedChildren(recorder, seed, redaction, blob_threshold, router)
    children.unfollow = follow_children(children.child_env, recorder.adopt, is_python_program)
    return children


class _CapturedChildren:
    """The Python children of a run being captured: the environment each one gets, the
    socket of their services' reports (opened at the first child), and the undo (called).
    One object, no closures: a run in flight keeps it, and each object it keeps is one more
    for the garbage collector."""

    __slots__ = ("blob_threshold", "recorder", "redaction", "reports", "router", "seed", "unfollow")

    def __init__(
        self,
        recorder: Recorder,
        seed: int,
        redaction: RedactionConfig,
        blob_threshold: int,
        router: Router | None,
    ) -> None:
        self.recorder, self.seed, self.redaction = recorder, seed, redaction
        self.blob_threshold, self.router = blob_threshold, router
        self.reports: ServiceReports | None = None
        self.unfollow: Callable[[], None] | None = None

    def child_env(self, task: str, events: str) -> dict[str, str]:
        sockets: dict[str, str] = {}
        if self.router is not None:
            if self.reports is None:
                self.reports = ServiceReports(self.router, Path(events).parent / "services.sock")
            sockets["services_socket"] = str(self.reports.path)
        settings = child_settings(
            self.recorder.store,
            self.recorder.run_id,
            self.seed,
            self.redaction,
            self.blob_threshold,
            task=task,
            events=events,
            prefix=os.path.realpath(sys.prefix),
            **sockets,
        )
        return {ENV_VAR: settings}

    def __call__(self) -> None:
        reports, unfollow = self.reports, self.unfollow
        # The follower holds this object (``child_env``) and this object the follower
        # (``unfollow``): let go of both ends, so that the run is freed as it ends.
        self.reports = self.unfollow = None
        if reports is not None:
            reports.close()
        if unfollow is not None:
            unfollow()
