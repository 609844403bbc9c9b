"""The event loop a replayed agent's coroutines run on: one for the whole process, open in a
thread of its own, as a server's loop (or a worker's) runs for the life of its process.

What the agent made on it (a ``redis.asyncio`` pool, an ``AsyncOpenAI`` client's
connections, both made at import) stays usable from one replayed run to the next; a loop
per run (``asyncio.run``) closed them under the next one: ``Event loop is closed``. Each
coroutine runs as a task in the context of the code that hands it over (the replayed
run's), and is waited for in short waits, so a replay's deadline interrupts the wait and
the task is cancelled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from sandbox.seam.boundary import root_here

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def app_loop() -> asyncio.AbstractEventLoop:
    """The process's loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(  # in no run's context: each task is given its caller's
                target=contextvars.Context().run,
                args=(loop.run_forever,),
                name="sandbox-replayed-app",
                daemon=True,
            ).start()
            _loop = loop
        return _loop


def run_in_app_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end on :func:`app_loop`, in the caller's context; return
    its value or raise its exception (waited for a tenth of a second at a time: an
    exception set on the waiting thread lands at its next Python instruction)."""
    context = contextvars.copy_context()

    async def rooted() -> T:
        root_here()  # the run's code ran in the task (or thread) the run began in: its main
        return await coroutine

    async def in_context() -> T:
        return await asyncio.get_running_loop().create_task(rooted(), context=context)

    future = asyncio.run_coroutine_threadsafe(in_context(), app_loop())
    try:
        while True:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                return future.result(timeout=0.1)
    except BaseException:
        future.cancel()
        raise
