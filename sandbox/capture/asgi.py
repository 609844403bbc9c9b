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
through uncaptured; the names of the environment variables the lifespan reads (the
settings its clients are made from) count among every run's reads, as a script's reads at
import do (:func:`sandbox.capture.envreads.starting`). The middleware needs no web
framework: it speaks plain ASGI.

Each run's labels hold its request line (``http.method``, ``http.path``, ``http.query``),
its log the request's headers (redacted) and body as the app read it
(:mod:`sandbox.capture.inbound`), and :func:`replay_request` sends that request through the
app again, its lifespan started around it. Given no entrypoint, the middleware records where
a module holds the app (``chat:app``), and the replay sends the request through it
(:func:`sandbox.capture.served.request_replayer`); or give the run an entrypoint that calls it
(``entrypoint=Entrypoint(kind="callable", target="service:replay")`` with
``def replay(): return replay_request(app)``). Either way the request replays like any run. A
request's result, unless the application records one (``capture.result``), is
``{"status": N}``, its answer's status. A request marked failed
(a 5xx, or ``mark_failed`` without a predicate) is judged on replay by whether the
replayed request is marked failed again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from asgi_lifespan import LifespanManager, LifespanNotSupported

from sandbox.capture import envreads
from sandbox.capture.inbound import RequestTee
from sandbox.capture.middleware import ServiceCapture, answered, to_replay
from sandbox.capture.run import run
from sandbox.capture.whereis import own_attributes
from sandbox.seam import boundary
from sandbox.seam.apploop import run_in_app_loop

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

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


class CaptureMiddleware(ServiceCapture):
    """Capture each HTTP request of ``app`` as a run (see the module documentation)."""

    route_name = staticmethod(route_name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "lifespan":  # the app starting: its settings count for its runs
            if not self._found:  # its module imported by now: looked for off any request
                self._settle(self._app_of(scope))
            with envreads.starting():
                await self.app(scope, receive, send)
            return
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watched(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status.append(int(message.get("status", 200)))
            await send(message)

        if not self._found:
            self._settle(self._app_of(scope))
        labels = self.labels(
            str(scope.get("method", "GET")),
            str(scope.get("path", "/")),
            bytes(scope.get("query_string", b"")).decode("latin-1"),
        )
        async with run(self.name(scope), **{**self.settings, "labels": labels}) as rec:
            if rec.replaying:  # a replay sends the recorded request itself: it records it
                await self.app(scope, receive, watched)
            else:
                scheme = str(scope.get("scheme", "http"))
                tee = RequestTee(rec, list(scope.get("headers", [])), scheme)
                try:
                    await self.app(scope, tee.receive(receive), watched)
                finally:
                    tee.end()
            if status:
                answered(rec, status[0], self.failed_status)

    def _app_of(self, scope: Scope) -> object:
        """The app to replay requests through: the one that set ``scope["app"]`` (Starlette,
        FastAPI) when it holds this middleware, else this middleware."""
        app = scope.get("app")
        return app if captures(app) else self


def captures(app: object) -> bool:
    """Whether ``app`` is an ASGI app that captures its requests: a
    :class:`CaptureMiddleware`, or a Starlette (FastAPI) app with one among its middleware."""
    if isinstance(app, CaptureMiddleware):
        return True
    stack = own_attributes(app).get("user_middleware")  # no code of app's class runs
    return isinstance(stack, list) and any(
        own_attributes(m).get("cls") is CaptureMiddleware for m in stack
    )


def replay_request(app: ASGIApp, *, lifespan: bool = True) -> int:
    """Send the request of the run being replayed (its labels' request line, its recorded
    headers and body) through ``app`` again; return the status it answered. Called as (or
    by) a captured request's entrypoint. With ``lifespan``, the app's lifespan runs around
    the request (its startup and shutdown outside the run's recording, as at capture, where
    they ran before and after the requests; an app without one is sent the request alone).
    An answer at or above the status the middleware marked failures from (its label, else
    500) marks the replayed run failed, as the middleware did, when nothing marked it yet:
    ``app`` need not be the captured app (a kept 5xx then reproduces, a fixed one is gone)."""
    import httpx

    request = to_replay()

    async def send() -> int:
        async with _started(app, lifespan) as served:
            transport = httpx.ASGITransport(app=served, raise_app_exceptions=True)
            async with httpx.AsyncClient(transport=transport, base_url=request.origin) as client:
                answer = await client.request(
                    request.method, request.url, headers=request.headers, content=request.body
                )
                return answer.status_code

    status = run_in_app_loop(send())  # on the loop every replayed request runs on
    request.answered(status)  # as captured
    return status


@contextlib.asynccontextmanager
async def _started(app: ASGIApp, lifespan: bool) -> AsyncIterator[ASGIApp]:
    """``app`` with its lifespan started when ``lifespan`` (and it has one), shut down after
    the block. Startup and shutdown run in a task of their own outside the run's recording
    (:func:`~sandbox.seam.boundary.bypassed`): the clients they make are the run's, their
    own clock reads and draws are not; connections still go to the sandbox or are refused."""
    if not lifespan:
        yield app
        return
    manager = LifespanManager(app, startup_timeout=None, shutdown_timeout=None)
    try:
        with boundary.bypassed():
            await manager.__aenter__()
    except LifespanNotSupported:
        yield app
        return
    try:
        yield manager.app
    finally:
        with boundary.bypassed(), contextlib.suppress(Exception):
            await manager.__aexit__(None, None, None)
