"""Threads started inside a run belong to it: a ``threading.Thread`` started in a run's
context runs in a copy of that context (as an asyncio task does), and so does each function
handed to a ``concurrent.futures`` thread pool (``executor.submit``, ``loop.run_in_executor``;
``asyncio.to_thread`` copies it already). A pool's own worker threads are not the run's: they
outlive it and serve whoever submits next, so each submitted function carries its own
context instead. Outside any run nothing changes. A replay serves its whole process, but
which of the program's blocks is the run's is told by the context too
(:mod:`sandbox.replay.window`): there every thread and submitted function carries its
starter's context.
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import thread as pool_thread
from typing import Any

from sandbox.capture.shared import Shared, Undo
from sandbox.seam import boundary


def _carried() -> bool:
    """Whether work started here carries this context: a run's, or a replay's."""
    return boundary.in_context() or boundary.installed() is not None


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
        if _carried():
            return original_submit(self, contextvars.copy_context().run, fn, *args, **kwargs)
        return original_submit(self, fn, *args, **kwargs)

    threading.Thread.start = start  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = submit  # type: ignore[method-assign,assignment]

    def undo() -> None:
        if threading.Thread.start is start:
            threading.Thread.start = original_start  # type: ignore[method-assign]
        if ThreadPoolExecutor.submit is submit:
            ThreadPoolExecutor.submit = original_submit  # type: ignore[method-assign]

    return undo


THREADS = Shared(_inherit_context)
"""Threads and pool work started in a run's context inherit it."""
