"""Threads started inside a run belong to it: a ``threading.Thread`` started in a run's
context runs in a copy of that context (as an asyncio task does), and so does each function
handed to a ``concurrent.futures`` thread pool (``executor.submit``, ``loop.run_in_executor``;
``asyncio.to_thread`` copies it already). A pool's own worker threads are not the run's: they
outlive it and serve whoever submits next, so each submitted function carries its own
context instead, and its events are named by the task that submitted it, the pool and the
order that task submitted work to the pool in (``fetch-2/asyncio#3``), not by whichever idle
worker took it; so is the work handed to anyio's worker threads. The asyncio tasks a run
creates are named for the run as it creates them
(:func:`~sandbox.seam.boundary.task_created`). Outside any run nothing changes. A replay
serves its whole process, but which of the program's blocks is the run's is told by the
context too (:mod:`sandbox.replay.window`): there every thread and submitted function
carries its starter's context."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import thread as pool_thread
from typing import Any

from sandbox.capture.onimport import Originals, when_imported
from sandbox.capture.origin import passed_through
from sandbox.capture.shared import Shared, Undo
from sandbox.seam import boundary


def _carried() -> bool:
    """Whether work started here carries this context: a run's, or a replay's."""
    return boundary.in_context() or boundary.installed() is not None


_NOT_NUMBERED = (socket.getaddrinfo, socket.getnameinfo)
"""Pool work not counted among a run's submissions: asyncio's name lookups
(``loop.getaddrinfo``), which a client makes for each new connection, and a replay that
serves its exchanges from the recording makes none of."""


@passed_through  # a library's work that it runs is not taken for the sandbox's own
def _run_as(name: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run submitted work (``context.run`` of it, in its submitter's context), its events
    the task ``name``'s."""
    with boundary.pool_work(name):
        return fn(*args, **kwargs)


def _pool_work_name(prefix: str) -> str | None:
    """:func:`~sandbox.seam.boundary.pool_work_name`, or ``None`` (named by the worker)
    when it fails: capture fails open."""
    with contextlib.suppress(Exception):
        return boundary.pool_work_name(prefix)
    return None


def _inherit_context() -> Undo:
    original_start = threading.Thread.start
    original_submit = ThreadPoolExecutor.submit
    worker = getattr(pool_thread, "_worker", None)

    def start(self: threading.Thread) -> None:
        if _carried() and getattr(self, "_target", None) is not worker:
            run = self.run
            context = contextvars.copy_context()
            self.run = lambda: context.run(run)  # type: ignore[method-assign]
        original_start(self)

    def submit(self: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        if not _carried():
            return original_submit(self, fn, *args, **kwargs)
        context = contextvars.copy_context()
        name = None
        if not any(fn is lookup for lookup in _NOT_NUMBERED):  # fn may be unhashable
            name = _pool_work_name(getattr(self, "_thread_name_prefix", "") or "pool")
        if name is None:
            return original_submit(self, context.run, fn, *args, **kwargs)
        return original_submit(self, _run_as, name, context.run, fn, *args, **kwargs)

    threading.Thread.start = start  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = submit  # type: ignore[method-assign,assignment]
    unnumber = _number_tasks()
    anyio_originals: Originals = []
    stop_anyio = when_imported({ANYIO_BACKEND: lambda found: _patch_anyio(found, anyio_originals)})

    def undo() -> None:
        unnumber()
        stop_anyio()
        for cls, attr, original in reversed(anyio_originals):
            setattr(cls, attr, original)
        if threading.Thread.start is start:
            threading.Thread.start = original_start  # type: ignore[method-assign]
        if ThreadPoolExecutor.submit is submit:
            ThreadPoolExecutor.submit = original_submit  # type: ignore[method-assign]

    return undo


def _number_tasks() -> Undo:
    """Name each asyncio task a run creates (``loop.create_task``, which
    ``asyncio.create_task``, ``gather`` and task groups go through) as it is created, in the
    context it will run in (:func:`~sandbox.seam.boundary.task_created`)."""
    cls = asyncio.BaseEventLoop
    original = cls.create_task

    def create_task(self: Any, coro: Any, *args: Any, **kwargs: Any) -> Any:
        task = original(self, coro, *args, **kwargs)
        context: contextvars.Context | None = kwargs.get("context")
        with contextlib.suppress(Exception):  # fails open: named as it crosses then
            if context is None:
                boundary.task_created(task)
            else:
                context.run(boundary.task_created, task)
        return task

    cls.create_task = create_task  # type: ignore[method-assign]
    # Python 3.11's ``asyncio.create_task`` and task groups name the task after creating it.
    set_name = getattr(asyncio.tasks, "_set_task_name", None)

    def named(task: Any, name: Any) -> None:
        assert set_name is not None
        set_name(task, name)
        if name is not None:
            with contextlib.suppress(Exception):
                boundary.task_created(task)

    if set_name is not None:
        setattr(asyncio.tasks, "_set_task_name", named)  # noqa: B010

    def undo() -> None:
        if cls.create_task is create_task:
            cls.create_task = original  # type: ignore[method-assign]
        if getattr(asyncio.tasks, "_set_task_name", None) is named:
            setattr(asyncio.tasks, "_set_task_name", set_name)  # noqa: B010

    return undo


ANYIO_BACKEND = "anyio._backends._asyncio"


def _patch_anyio(module: Any, originals: Originals) -> None:
    """Name the work handed to anyio's worker threads (``anyio.to_thread.run_sync``: how
    Starlette runs sync endpoints and pydantic-ai sync tools) by its submission, as a
    thread pool's: anyio's workers all bear one name."""
    cls = getattr(module, "AsyncIOBackend", None)
    original = getattr(cls, "__dict__", {}).get("run_sync_in_worker_thread")
    if not isinstance(cls, type) or not isinstance(original, classmethod):
        return
    run = original.__func__

    async def run_sync_in_worker_thread(
        cls: Any, func: Any, args: tuple[Any, ...], *rest: Any, **kwargs: Any
    ) -> Any:
        name = _pool_work_name("anyio") if _carried() else None
        if name is not None:
            func, args = _run_as, (name, func, *args)  # in the context anyio copied
        return await run(cls, func, args, *rest, **kwargs)

    setattr(cls, "run_sync_in_worker_thread", classmethod(run_sync_in_worker_thread))  # noqa: B010
    originals.append((cls, "run_sync_in_worker_thread", original))


THREADS = Shared(_inherit_context)
"""Threads and pool work started in a run's context inherit it."""
