"""An ASGI middleware that captures each HTTP request of an agent service as its own run.

::

    from sandbox.capture.asgi import CaptureMiddleware

    app = FastAPI()
    app.add_middleware(CaptureMiddleware, store="snapshots", keep="failed")

Each request is one :func:`sandbox.capture.run`, named after its route (``POST /refunds/{id}``:
the path template of the Starlette/FastAPI route that matches, else the raw path), so a
service handling many requests at once records each one apart, and ``keep="failed"`` keeps
only the requests that failed. A request fails when the application raises (the exception
is recorded and raised on, unchanged), when it answers with a status of 500 or above, or
when the agent calls :func:`sandbox.capture.mark_failed`. Other settings are
:class:`~sandbox.capture.run.Capture`'s. Non-HTTP traffic (lifespan, websockets) passes
through uncaptured. The middleware needs no web framework: it speaks plain ASGI.

Each run's labels hold its request line (``http.method``, ``http.path``, ``http.query``; not
the body nor the headers), and :func:`replay_request` sends that request through the app
again: give the run an entrypoint that calls it (``entrypoint=Entrypoint(kind="callable",
target="service:replay")`` with ``def replay(): return replay_request(app)``) and the
request replays like any run. A request marked failed (a 5xx, or ``mark_failed`` without a
predicate) is judged on replay by whether the replayed request is marked failed again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from sandbox.capture.markers import active, mark_failed
from sandbox.capture.run import run
from sandbox.errors import CaptureError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

METHOD, PATH, QUERY = "http.method", "http.path", "http.query"
"""The labels holding a captured request's line."""
FAILED_STATUS = "http.failed_status"
"""The label holding the status from which the middleware marked a request failed."""
FULL_MATCH = 2
"""``starlette.routing.Match.FULL``: a route that matches the request's method and path."""


def route_name(scope: Scope) -> str:
    """``METHOD /path/{template}`` of the route that matches ``scope`` in the application
    that set ``scope["app"]`` (Starlette, FastAPI), else ``METHOD /raw/path``."""
    method = str(scope.get("method", "GET"))
    routes = getattr(scope.get("app"), "routes", None) or []
    for route in routes:
        matches = getattr(route, "matches", None)
        template = getattr(route, "path", None)
        if matches is None or not isinstance(template, str):
            continue
        try:
            match, _ = matches(scope)
        except Exception:  # a route that cannot judge this scope: not this one
            continue
        if getattr(match, "value", match) == FULL_MATCH:
            return f"{method} {template}"
    return f"{method} {scope.get('path', '/')}"


class CaptureMiddleware:
    """Capture each HTTP request of ``app`` as a run (see the module documentation)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        name: Callable[[Scope], str] = route_name,
        failed_status: int = 500,
        **settings: Any,
    ) -> None:
        self.app = app
        self.name = name
        self.failed_status = failed_status
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watched(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status.append(int(message.get("status", 200)))
            await send(message)

        labels = {
            **self.settings.get("labels", {}),
            METHOD: str(scope.get("method", "GET")),
            PATH: str(scope.get("path", "/")),
            QUERY: bytes(scope.get("query_string", b"")).decode("latin-1"),
            FAILED_STATUS: str(self.failed_status),
        }
        async with run(self.name(scope), **{**self.settings, "labels": labels}):
            await self.app(scope, receive, watched)
            if status and status[0] >= self.failed_status:
                mark_failed(f"HTTP {status[0]} from {self.name(scope)}")


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _app_loop() -> asyncio.AbstractEventLoop:
    """The event loop every request replayed in this process runs on, in a thread of its
    own, as a server's loop runs for the life of its process: what the app made on it (a
    ``redis.asyncio`` pool, an ``AsyncOpenAI`` client's connections, both made at import)
    stays usable from one replayed request to the next (a loop per request closed them
    under the next one: ``Event loop is closed``)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(  # in no run's context: each request's task is given its run's
                target=contextvars.Context().run,
                args=(loop.run_forever,),
                name="sandbox-replayed-app",
                daemon=True,
            ).start()
            _loop = loop
        return _loop


def _wait(future: concurrent.futures.Future[int]) -> int:
    """The request's answer, waited for a tenth of a second at a time: a replay's deadline
    interrupts the waiting thread between two waits (an exception set on a thread lands at
    its next Python instruction), and the request is then cancelled on the app's loop."""
    try:
        while True:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                return future.result(timeout=0.1)
    except BaseException:
        future.cancel()
        raise


def replay_request(app: ASGIApp) -> int:
    """Send the request of the run being replayed (its labels' request line) through ``app``
    again; return the status it answered. Called as (or by) a captured request's entrypoint.
    An answer at or above the status the middleware marked failures from (its label, else
    500) marks the replayed run failed, as the middleware did, when nothing marked it yet:
    ``app`` need not be the captured app (a kept 5xx then reproduces, a fixed one is gone)."""
    import httpx

    recorder = active()
    labels = recorder.writer.manifest.labels if recorder is not None else {}
    if recorder is None or METHOD not in labels or PATH not in labels:
        raise CaptureError("no captured HTTP request is being replayed (no http.* labels)")
    url = labels[PATH] + (f"?{labels[QUERY]}" if labels.get(QUERY) else "")

    async def send() -> int:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
        async with httpx.AsyncClient(transport=transport, base_url="http://replay") as client:
            return (await client.request(labels[METHOD], url)).status_code

    replayed = contextvars.copy_context()  # the replayed run's: the app's calls are its own

    async def in_the_run() -> int:
        return await asyncio.get_running_loop().create_task(send(), context=replayed)

    status = _wait(asyncio.run_coroutine_threadsafe(in_the_run(), _app_loop()))
    failed = labels.get(FAILED_STATUS, "500")
    if failed.isdigit() and status >= int(failed) and recorder.failure is None:
        recorder.mark_failed(f"HTTP {status} from {recorder.writer.manifest.name}")
    return status
