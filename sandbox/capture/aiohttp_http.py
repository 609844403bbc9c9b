"""Capture (and replay) of aiohttp's client: each request a ``ClientSession`` sends inside a
run crosses the seam as an ``http`` call, in a client middleware (aiohttp 3.12 and later)
that ``ClientSession._request`` puts last, after the session's and the request's own, for
each request made in a run, so that it sees the request as sent (sessions made before the
run, at start-up, too); recorded as an httpx exchange is
(:class:`~sandbox.capture.http.HTTPAdapter` makes its events: the same fields, redaction and
model-API recognition). The body is teed as aiohttp's parser feeds the response's stream
(decoded: what ``read``, ``json``, ``text`` and ``content.iter_chunked`` give the caller)
and recorded when fed to its end (or, at the run's end, what was fed, with the error that
says so). Replayed as a ``ClientResponse`` over the recorded bytes, nothing connected.

Not captured, and named once on stderr (refused on replay): a body aiohttp streams (a
file, a generator, a multipart form) and a websocket's upgrade; nor, unnamed, requests of
an aiohttp before 3.12 (no middlewares). A request an SDK's transport over aiohttp sends
(``openai``'s ``DefaultAioHttpClient``, litellm's), which that transport records itself,
is left to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http
import inspect
from collections.abc import Awaitable, Callable
from types import ModuleType, SimpleNamespace
from typing import Any

from sandbox.capture.http import Tee, Uncaptured, recorded_content, within_sdk_transport
from sandbox.capture.onimport import Originals, class_patches
from sandbox.capture.origin import passed_through
from sandbox.capture.prepared import (
    WIRE,
    Answer,
    PreparedExchange,
    PreparedRequest,
    Route,
)
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Outcome, RecordedError
from sandbox.snapshot.events import ErrorInfo, Event, HTTPExchange

Handler = Callable[[Any], Awaitable[Any]]


class AiohttpExchange(PreparedExchange):
    """One aiohttp exchange (its ``ClientRequest`` as sent): recorded as its body is fed,
    replayed as a ``ClientResponse``."""

    __slots__ = ("_replayed",)

    uncaptured = Uncaptured(
        "aiohttp",
        "with a body from a file, a generator or a form, or a websocket",
        "send the body as bytes or JSON",
    )

    def __init__(
        self, prepared: Any, request: PreparedRequest, body: bytes | None, parsed: Any, url: str
    ) -> None:
        super().__init__(prepared, request, body, parsed, url)
        self._replayed = b""

    @staticmethod
    def body_of(prepared: Any) -> tuple[bool, bytes | None]:
        """The body as bytes when aiohttp holds it so (bytes, text, JSON, a urlencoded
        form); not a websocket's upgrade."""
        if "upgrade" in {name.lower() for name in prepared.headers}:
            return False, None
        body = prepared.body
        if not body:
            return True, None
        value = getattr(body, "_value", None)
        if type(body).__name__ in _HELD and isinstance(value, (bytes, bytearray)):
            return True, bytes(value)
        return False, None

    def send_instead(self, data: bytes) -> None:
        self._prepared.body = data
        self._prepared.headers["Content-Length"] = str(len(data))

    def record(self, call: Call, outcome: Outcome[Any], emitter: Any) -> Any:
        if outcome.error is not None:
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(outcome.error))
            return None
        response: Any = outcome.value
        StreamTee(response.content, self, call, emitter, _answer(response)).watch()
        return response

    def record_replayed(self, call: Call, value: Any, emitter: Any) -> Any:
        self.emit_exchange(call, emitter, _answer(value), self._replayed, None)
        return value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, HTTPExchange)
        if event.error is not None and event.status is None:
            raise RecordedError(event.error)
        self._replayed = recorded_content(event, blobs)
        return _response(self._prepared, event, self._replayed)


_HELD = frozenset({"BytesPayload", "StringPayload", "JsonPayload"})
"""aiohttp's payloads that hold their bytes (``_value``)."""


def _answer(response: Any) -> Answer:
    """What the events read of a response: its status and headers, decoded (no wire
    headers: aiohttp gives the content decoded)."""
    return Answer(SimpleNamespace(status_code=response.status, headers=response.headers), WIRE)


class StreamTee(Tee):
    """A response's ``StreamReader``, teed as aiohttp's parser feeds it (what it holds
    already first): the exchange is recorded when it is fed to its end or fails."""

    def watch(self) -> None:
        stream = self._inner
        self._chunks.extend(bytes(chunk) for chunk in getattr(stream, "_buffer", ()))
        if stream.is_eof() or not hasattr(stream, "_buffer"):  # whole already (or empty)
            self.finish()
            return
        _TEES[id(stream)] = self
        self._emitter.defer(self, self.unfinished)
        stream.__class__ = _teeing(stream.__class__)  # its slots take no attribute of ours

    def finish(self, error: ErrorInfo | None = None) -> None:
        _TEES.pop(id(self._inner), None)
        super().finish(error)

    def fed(self, data: bytes) -> None:
        self._chunks.append(bytes(data))


_TEES: dict[int, StreamTee] = {}
"""The tee of each response stream being fed (by the stream's id) until it ends."""


@functools.cache
def _teeing(cls: Any) -> type:
    """``cls`` (aiohttp's ``StreamReader``) telling the tee of each of its instances
    (:data:`_TEES`) what it is fed, and when it ends or fails."""

    class Teeing(cls):  # type: ignore[misc]
        __slots__ = ()

        def feed_data(self, data: bytes, *args: Any) -> None:
            tee = _TEES.get(id(self))
            if tee is not None:
                tee.fed(data)
            super().feed_data(data, *args)

        def feed_eof(self) -> None:
            super().feed_eof()
            tee = _TEES.get(id(self))
            if tee is not None:
                tee.finish()

        def set_exception(self, exc: BaseException, *args: Any) -> None:
            super().set_exception(exc, *args)
            tee = _TEES.get(id(self))
            if tee is not None:
                tee.finish(boundary.error_info(exc))

    return Teeing


class _Unpaused:
    """The protocol of a replayed body's stream: all of it is there, nothing to pause."""

    _reading_paused = False

    def pause_reading(self, *args: Any, **kwargs: Any) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


def _response(request: Any, event: HTTPExchange, content: bytes) -> Any:
    """The ``ClientResponse`` the recorded exchange ``event`` answered ``request`` with."""
    from aiohttp import HttpVersion11
    from aiohttp.helpers import TimerNoop
    from aiohttp.streams import StreamReader
    from multidict import CIMultiDict, CIMultiDictProxy

    loop = asyncio.get_running_loop()
    cls = request.response_class
    settings: dict[str, Any] = {
        "writer": None,
        "continue100": None,
        "timer": TimerNoop(),
        "request_info": request.request_info,
        "traces": [],
        "loop": loop,
        "session": request._session,
    }
    if "stream_writer" in inspect.signature(cls).parameters:
        settings["stream_writer"] = SimpleNamespace(output_size=0)
    response = cls(request.method, request.original_url, **settings)
    headers = CIMultiDict(
        (k, v) for k, v in event.response_headers.items() if k.lower() not in WIRE
    )
    headers["Content-Length"] = str(len(content))
    response.status = event.status or 200
    response.reason = _reason(response.status)
    response.version = HttpVersion11
    response._headers = CIMultiDictProxy(headers)
    response._raw_headers = tuple((k.encode(), v.encode()) for k, v in headers.items())
    response._raw_cookie_headers = tuple(headers.getall("Set-Cookie", ()))
    stream = StreamReader(_Unpaused(), max(2**16, len(content) + 1), loop=loop)  # type: ignore[arg-type]
    if content:
        stream.feed_data(content)
    stream.feed_eof()
    response.content = stream
    return response


def _reason(status: int) -> str:
    with contextlib.suppress(ValueError):
        return http.HTTPStatus(status).phrase
    return ""


@passed_through  # what a library sends through it is not taken for the sandbox's own
async def _cross(request: Any, handler: Handler) -> Any:
    """The sandbox's middleware: ``request`` across the seam (see the module docstring)."""
    plan = Route.SEND if within_sdk_transport() else AiohttpExchange.plan(request, 2)
    if plan is Route.SEND:
        return await handler(request)
    if isinstance(plan, Route):  # its body not recorded: named once, refused on replay
        with boundary.bypassed():
            return await handler(request)
    name, normalized, exchange = plan
    return await boundary.athrough("http", name, normalized, lambda: handler(request), exchange)


MODULE = "aiohttp.client"
"""aiohttp's client, patched when the agent imports it (at once if it has)."""


def patch_aiohttp() -> Callable[[], None]:
    """Capture (and replay) aiohttp's ``ClientSession`` from now on (installed once for
    every holder); return the release."""
    return _PATCHING.acquire()


def patch(client: ModuleType, originals: Originals) -> None:
    """Put :func:`_cross` last among the middlewares of each request a ``ClientSession``
    makes inside a run (aiohttp without middlewares is left as it is)."""
    session = client.ClientSession
    original = session._request
    if "middlewares" not in inspect.signature(original).parameters:
        return

    @passed_through
    async def _request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if boundary.current() is not None:
            given = kwargs.get("middlewares")
            own = getattr(self, "_middlewares", ()) if given is None else given
            kwargs["middlewares"] = (*own, _cross)
        return await original(self, *args, **kwargs)

    session._request = _request
    originals.append((session, "_request", original))


_PATCHING = class_patches(MODULE, patch)
