"""Zero-code capture of HTTP and model calls, at the httpx transport.

:func:`patch_httpx` wraps ``HTTPTransport.handle_request`` and
``AsyncHTTPTransport.handle_async_request`` of ``httpx`` and of ``httpx2`` (which the
official ``openai`` and ``anthropic`` SDKs use), so any client built on them is captured
unchanged, and the aiohttp transport those SDKs ship (``DefaultAioHttpClient``) when aiohttp
is installed, litellm's own (its async calls'), ``requests``' HTTP adapter
(:mod:`sandbox.capture.requests_http`) and botocore's session
(:mod:`sandbox.capture.botocore_http`). A
request an agent makes straight through an ``aiohttp.ClientSession`` (the async client of
``google-genai``, say) is not captured, nor one through urllib3's own pools: the
first one in a run, outside any recorded call, is named once on stderr with its version
(:func:`warn_uncaptured`) so the gap shows at capture, not as a refused call at replay.
Each exchange crosses the seam as an ``http`` call: the request (method, URL, body) is the
normalized request; the response body is teed while the
caller reads it (streaming keeps streaming) and the ``http`` event is written when the body
is finished or closed. Exchanges a model API of the registry recognises
(:func:`sandbox.seam.llm.recognise`) also get an ``llm`` event (model, parameters, messages,
tools, assembled response, usage, provider metadata).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import itertools
import json
import sys
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from pydantic import JsonValue

from sandbox.capture.onimport import when_imported
from sandbox.capture.origin import asker
from sandbox.errors import CaptureError
from sandbox.seam import boundary, llm
from sandbox.seam.boundary import BlobReader, Call, Outcome, RecordedError
from sandbox.snapshot.events import BlobRef, ErrorInfo, Event, HTTPExchange, LLMCall
from sandbox.snapshot.hashing import read_json
from sandbox.snapshot.normalize import normalize_url, request_fingerprint

MODULES = ("httpx", "httpx2")
"""httpx-compatible modules patched when importable."""
AIOHTTP_TRANSPORTS = frozenset(
    f"{sdk}._vendor.httpx_aiohttp.transport" for sdk in ("openai", "anthropic")
)
"""The aiohttp transports (``DefaultAioHttpClient``) the SDKs ship, patched when imported."""
LITELLM_TRANSPORT = "litellm.llms.custom_httpx.aiohttp_transport"
"""litellm's httpx transport over aiohttp (its async calls' default), patched when imported."""
URLLIB3_POOL = "urllib3.connectionpool"
"""urllib3's connection pools (under ``requests`` and botocore), watched (not captured) when
imported."""
_URLLIB3_CALLERS = ("requests", "botocore", "urllib3")


@dataclass(frozen=True)
class Uncaptured:
    """A use of a captured client that its capture does not record (a streamed ``requests``
    response, a botocore body it cannot read), for :func:`warn_uncaptured` to name: the
    client's distribution, the use, and what to do instead."""

    distribution: str
    use: str
    advice: str


class HTTPEmitter(boundary.Emitter, Protocol):
    blob_threshold: int

    def elapsed(self) -> float: ...
    def emit_fields(
        self, event_type: type[Event], call: Call | None, fields: dict[str, Any]
    ) -> int: ...
    def emit_later(
        self,
        event_type: type[Event],
        call: Call | None,
        build: Callable[[Any], dict[str, Any]],
        *,
        failed: bool,
        size: int,
    ) -> int: ...
    def redact_headers(self, headers: Sequence[tuple[str, str]]) -> dict[str, str]: ...


def _body(
    data: bytes, content_type: str, emitter: HTTPEmitter, parsed: JsonValue = None
) -> tuple[JsonValue, BlobRef | None]:
    """A body as JSON when it is JSON, as text when it is text, else (or when large) a blob.
    ``parsed``: the body already read as JSON, if it was."""
    if not data:
        return None, None
    media = _media(content_type)
    if len(data) > emitter.blob_threshold:
        return None, emitter.store_payload(data, media)
    if "json" in media:
        if parsed is not None:
            return parsed, None
        with contextlib.suppress(ValueError):
            parsed = read_json(data)
            return parsed, None
    if media.startswith("text/") or "json" in media or "x-www-form-urlencoded" in media:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("utf-8"), None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, emitter.store_payload(data, media)


@functools.lru_cache(maxsize=256)
def _media(content_type: str) -> str:
    """The media type of a ``content-type`` value, lower case, without its parameters."""
    return content_type.split(";")[0].strip().lower() or "application/octet-stream"


def _header_items(headers: Any) -> tuple[tuple[str, str], ...]:
    """``headers.multi_items()`` (names lowered, in order, repeated names kept), decoded in
    one pass over the raw pairs."""
    encoding = headers.encoding
    return tuple(
        (key.lower().decode(encoding), value.decode(encoding)) for key, value in headers.raw
    )


def _header(items: tuple[tuple[str, str], ...], name: str) -> str:
    """The value of header ``name`` (lower case) as ``headers.get`` gives it: repeated ones
    joined with commas, ``""`` when absent."""
    return ", ".join(value for key, value in items if key == name)


class _HeaderView:
    """What an exchange's record reads of one set of headers: the decoded pairs, the
    content type and the content encoding."""

    __slots__ = ("content_encoding", "content_type", "items")

    def __init__(self, headers: Any) -> None:
        self.items = _header_items(headers)
        self.content_type = _header(self.items, "content-type")
        self.content_encoding = _header(self.items, "content-encoding")


_UNSET: Any = object()
_VIEWS: dict[tuple[Any, ...], _HeaderView] = {}
_VIEWS_LIMIT = 512


def _header_view(headers: Any) -> _HeaderView:
    """The view of ``headers``, remembered for the same raw pairs and encoding (a client
    sends the same headers request after request; a server answers with the same ones
    but for the date and the length). The encoding in the key is the one set on them, if
    any (``None``: the one httpx derives from the raw pairs themselves)."""
    encoding = getattr(headers, "_encoding", _UNSET)
    pairs = getattr(headers, "_list", None)  # (raw name, lowered name, value): no copy made
    key = (
        headers.encoding if encoding is _UNSET else encoding,
        *(headers.raw if pairs is None else pairs),
    )
    found = _VIEWS.get(key)
    if found is None:
        found = _HeaderView(headers)
        if len(_VIEWS) >= _VIEWS_LIMIT:
            _VIEWS.clear()
        _VIEWS[key] = found
    return found


def _decode(data: bytes, encoding: str) -> bytes:
    encoding = encoding.lower().strip()
    with contextlib.suppress(zlib.error):
        if encoding == "gzip":
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(data)
            except zlib.error:
                return zlib.decompress(data, -zlib.MAX_WBITS)
    return data


class HTTPAdapter:
    """Records an exchange as ``http`` (and ``llm``) events once its body is finished;
    replay rebuilds a response of the same httpx module from the recorded event. One
    adapter serves one crossing: it holds the exchange's outcome until its events are made
    (slots, no closures: a run held in memory keeps it, and each object it keeps is one
    more for the garbage collector to scan). It never holds the recorder: the response
    holds the adapter (through its stream) after the run is over, and with it would hold
    the whole run until a collection."""

    __slots__ = (
        "_api",
        "_call",
        "_duration",
        "_error",
        "_made",
        "_raw",
        "_response_headers",
        "_status",
        "body",
        "is_async",
        "method",
        "module",
        "parsed",
        "request",
        "request_headers",
        "url",
    )

    def __init__(
        self,
        module: Any,
        request: Any,
        body: bytes | None,
        is_async: bool,
        parsed: JsonValue = None,
        url: str | None = None,
    ) -> None:
        self.module = module
        self.request: Any = request
        """The request, until its exchange is done (:meth:`emit_exchange`); its method and
        headers are what the events read of it."""
        self.method: str = request.method
        self.request_headers: Any = request.headers
        self.body = body
        self.is_async = is_async
        self.parsed: JsonValue = parsed
        """The body as the normalized request holds it (:func:`_cross`), when it is JSON."""
        self.url = str(request.url) if url is None else url
        """The request's URL, as ``str(request.url)`` gives it."""
        self._api: llm.LLMApi | None = None
        # The exchange's outcome, once done (:meth:`emit_exchange`): the response's status
        # and headers (none for an error), its body as read, the error, the duration.
        self._status: int | None = None
        self._response_headers: Any = None
        self._raw = b""
        self._error: ErrorInfo | None = None
        self._duration = 0.0
        self._made: tuple[dict[str, Any], JsonValue, JsonValue, bool] | None = None
        self._call: Call | None = None

    # --- capture -------------------------------------------------------------------------

    def record(self, call: Call, outcome: Outcome[Any], emitter: Any) -> Any:
        if outcome.error is not None:
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(outcome.error))
            return None
        response: Any = outcome.value
        tee = (_async_tee if self.is_async else _sync_tee)(self.module)
        stream = tee(response.stream, self, call, emitter, response)
        response.stream = stream
        emitter.defer(stream, stream.unfinished)
        return response

    def record_replayed(self, call: Call, value: Any, emitter: Any) -> Any:
        """Replay: record the rebuilt response (its body already read) as capture does."""
        self.emit_exchange(call, emitter, value, value.content, None)
        return value

    def emit_exchange(
        self,
        call: Call,
        emitter: HTTPEmitter,
        response: Any,
        raw: bytes,
        error: ErrorInfo | None,
    ) -> None:
        """Write the ``http`` event of this exchange (and its ``llm`` event for a model API):
        ``response`` with its body ``raw`` as read, or ``error``. Replay calls it with the
        response it rebuilt, so the replayed run records the exchange as capture does.
        The events are made from the exchange's bytes, status and headers, which do not
        change: for a run held in memory, only if it is kept (:meth:`Recorder.emit_later`).
        From here on the adapter keeps what the events read of the request (its method and
        headers), not the request itself (and the URL, streams and dicts it holds)."""
        self._duration = emitter.elapsed() - call.started
        status = self._status = None if response is None else response.status_code
        if response is not None:
            self._response_headers = response.headers  # not the response itself
        self._raw, self._error, self._call = raw, error, call
        self.request = None
        self._api = llm.recognise(self.method, self.url, self.request_headers)
        size = len(raw) + len(self.body or b"") + 1024
        emitter.emit_later(HTTPExchange, call, self, failed=error is not None, size=size)
        if self._api is None:
            return
        failed = error is not None or status is None or status >= 400
        emitter.emit_later(LLMCall, None, self._llm_fields, failed=failed, size=0)

    def _exchange_once(
        self, emitter: HTTPEmitter
    ) -> tuple[dict[str, Any], JsonValue, JsonValue, bool]:
        """:meth:`_exchange` of the outcome :meth:`emit_exchange` held (made once for both
        events)."""
        made = self._made
        if made is None:
            made = self._made = self._exchange(emitter)
        return made

    def __call__(self, emitter: HTTPEmitter) -> dict[str, Any]:
        """The ``http`` event's fields: the adapter is what :meth:`emit_exchange` passes to
        build them (not a bound method of it: one object fewer a held exchange)."""
        return self._exchange_once(emitter)[0]

    def _exchange(self, emitter: HTTPEmitter) -> tuple[dict[str, Any], JsonValue, JsonValue, bool]:
        """The ``http`` event's fields, the request's and the response's bodies as read, and
        whether the response was streamed."""
        status, error, raw = self._status, self._error, self._raw
        req_view = _header_view(self.request_headers)
        req_body, req_blob = _body(self.body or b"", req_view.content_type, emitter, self.parsed)
        streamed = False
        resp_body: JsonValue = None
        fields: dict[str, Any] = {
            "method": self.method,
            "url": self.url,
            "request_headers": emitter.redact_headers(req_view.items),
            "request_body": req_body,
            "request_blob": req_blob,
            "error": error,
            "duration": self._duration,
        }
        if status is not None:
            view = _header_view(self._response_headers)
            ctype = view.content_type
            streamed = "text/event-stream" in ctype
            data = _decode(raw, view.content_encoding) if view.content_encoding else raw
            resp_body, resp_blob = _body(data, ctype, emitter)
            fields["status"] = status
            fields["response_headers"] = emitter.redact_headers(view.items)
            fields["response_body"] = resp_body
            fields["response_blob"] = resp_blob
            fields["streamed"] = streamed
            if resp_blob is not None and resp_blob.media_type.startswith("text/"):
                resp_body = data.decode("utf-8", "replace")
        return fields, req_body, resp_body, streamed

    def _llm_fields(self, emitter: HTTPEmitter) -> dict[str, Any]:
        """The ``llm`` event's fields, from the exchange's bodies as read."""
        _, req_body, resp_body, streamed = self._exchange_once(emitter)
        api, call, status, error = self._api, self._call, self._status, self._error
        assert api is not None and call is not None
        if req_body is None and self.body:
            with contextlib.suppress(ValueError):
                req_body = json.loads(self.body)
        parsed = api.parse_request(self.url, req_body)
        answer = llm.LLMResponse()
        if status is not None and status < 400:
            answer = api.parse_response(resp_body, streamed)
        elif status is not None and error is None:
            error = ErrorInfo(type=f"HTTP {status}", message=str(resp_body)[:500])
        request = parsed.meaning()
        return {
            "name": parsed.model,
            "fingerprint": request_fingerprint("llm", parsed.model, request),
            "task": call.task,
            "parent_span": call.span,
            "attempt": call.attempt,
            "provider": parsed.provider,
            "model": parsed.model,
            "messages": parsed.messages,
            "params": parsed.params,
            "tools": parsed.tools,
            "response": answer.response or None,
            "usage": answer.usage,
            "provider_meta": {"api": api.name, **answer.meta},
            "streamed": streamed,
            "error": error,
            "duration": self._duration,
        }

    # --- replay --------------------------------------------------------------------------

    def rewrite_json(self, edit: Callable[[Any], Any]) -> None:
        """Send ``edit(body)`` instead of this request's JSON body (a fork's live model call
        with another model or parameters); a body that is not JSON is left alone."""
        try:
            body = json.loads(self.body or b"")
        except ValueError:
            return
        edited = edit(body)
        if edited == body:
            return
        data = json.dumps(edited).encode()
        self.send_instead(data)
        self.body = data
        self.parsed = None  # read again from the body sent

    def send_instead(self, data: bytes) -> None:
        """Make the request (not sent yet) send ``data`` as its body."""
        self.request.headers["content-length"] = str(len(data))
        self.request.stream = self.module.ByteStream(data)
        self.request._content = data

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, HTTPExchange)
        if event.error is not None and event.status is None:
            raise RecordedError(event.error)
        content = recorded_content(event, blobs)
        headers = {
            k: v
            for k, v in event.response_headers.items()
            if k not in {"content-length", "content-encoding", "transfer-encoding"}
        }
        return self.module.Response(
            event.status or 200, headers=headers, content=content, request=self.request
        )


def recorded_content(event: HTTPExchange, blobs: BlobReader) -> bytes:
    """The response body a recorded exchange holds, as the bytes a replay answers with."""
    if event.response_blob is not None:
        return blobs(event.response_blob.sha256)
    if isinstance(event.response_body, str):
        return event.response_body.encode()
    if event.response_body is None:
        return b""
    return json.dumps(event.response_body).encode()


class Tee:
    """What the tee streams of one response share: the body read so far, and writing the
    exchange's event once, when the body is finished or closed (or, still open, at the
    run's end)."""

    def __init__(
        self, inner: Any, adapter: HTTPAdapter, call: Call, emitter: Any, response: Any
    ) -> None:
        self._inner = inner
        self._chunks: list[bytes] = []
        self._adapter = adapter
        self._call = call
        self._emitter = emitter
        self._response = response
        self._ends = itertools.count()
        """``next`` of it is 0 for the first end only (atomic: a stream may be closed in one
        thread while the run's end flushes it in another)."""

    def finish(self, error: ErrorInfo | None = None) -> None:
        if next(self._ends):
            return
        emitter, response = self._emitter, self._response
        # The response holds this stream: let go of it (and of what the event needed) so
        # that the two are freed as soon as the caller drops the response, not by a
        # collection of reference cycles.
        self._emitter = self._response = None
        emitter.undefer(self)
        self._adapter.emit_exchange(self._call, emitter, response, b"".join(self._chunks), error)
        self._chunks = []

    def unfinished(self) -> None:
        """The run ends with this body not read to the end."""
        self.finish(ErrorInfo(type="IncompleteRead", message="body not read to the end"))


@functools.cache
def _sync_tee(module: Any) -> type[Tee]:
    """The tee stream class of ``module`` (made once per module)."""
    base = module.SyncByteStream

    class TeeStream(Tee, base):  # type: ignore[misc, valid-type]
        def __iter__(self) -> Iterator[bytes]:
            chunks = self._chunks
            try:
                for chunk in self._inner:
                    chunks.append(chunk)
                    yield chunk
            except BaseException as exc:
                self.finish(boundary.error_info(exc))
                raise
            self.finish()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self.finish()

    return TeeStream


@functools.cache
def _async_tee(module: Any) -> type[Tee]:
    """The async tee stream class of ``module`` (made once per module)."""
    base = module.AsyncByteStream

    class AsyncTeeStream(Tee, base):  # type: ignore[misc, valid-type]
        async def __aiter__(self) -> AsyncIterator[bytes]:
            chunks = self._chunks
            try:
                async for chunk in self._inner:
                    chunks.append(chunk)
                    yield chunk
            except BaseException as exc:
                self.finish(boundary.error_info(exc))
                raise
            self.finish()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self.finish()

    return AsyncTeeStream


def _read_json(body: bytes | None) -> tuple[JsonValue, bool]:
    """The body as JSON and ``True``, else as text and ``False``."""
    if not body:
        return None, False
    try:
        return read_json(body), True
    except ValueError:
        return body.decode("utf-8", "replace"), False


def _name(request: Any) -> str:
    url = request.url
    return f"{request.method} {url.scheme}://{url.netloc.decode()}{url.path}"


_TARGETS: dict[tuple[str, str], tuple[str, str]] = {}
_TARGETS_LIMIT = 1024


def _target(request: Any, url: str) -> tuple[str, str]:
    """The crossing's name (:func:`_name`) and the normalized URL (:func:`normalize_url`)
    of a request to ``url`` (``str(request.url)``), remembered for the last thousand
    methods and URLs: an agent calls the same few again and again."""
    key = (request.method, url)
    found = _TARGETS.get(key)
    if found is None:
        found = (_name(request), normalize_url(url))
        if len(_TARGETS) >= _TARGETS_LIMIT:
            _TARGETS.clear()
        _TARGETS[key] = found
    return found


def crossing(request: Any, body: bytes | None) -> tuple[str, dict[str, JsonValue], Any, str]:
    """The crossing of ``request`` (httpx's shape) with its ``body`` read: its name, its
    normalized request (method, URL, body), the body as JSON when it is JSON (else
    ``None``) and the URL."""
    parsed, is_json = _read_json(body)
    url = str(request.url)
    name, normal_url = _target(request, url)
    normalized: dict[str, JsonValue] = {"method": request.method, "url": normal_url, "body": parsed}
    return name, normalized, parsed if is_json else None, url


def _cross(
    module: Any, request: Any, body: bytes | None, is_async: bool
) -> tuple[str, dict[str, JsonValue], HTTPAdapter]:
    """:func:`crossing`, with the adapter recording it."""
    name, normalized, parsed, url = crossing(request, body)
    return name, normalized, HTTPAdapter(module, request, body, is_async, parsed, url)


def _read_body(request: Any) -> bytes | None:
    try:
        content: bytes = request.content
        return content
    except Exception:  # RequestNotRead: a streaming upload; read it (httpx keeps the bytes)
        try:
            data: bytes = request.read()
            return data
        except Exception:
            return None


async def _aread_body(request: Any) -> bytes | None:
    try:
        content: bytes = request.content
        return content
    except Exception:
        try:
            data: bytes = await request.aread()
            return data
        except Exception:
            return None


class _Patch:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.originals: list[tuple[type, str, Any]] = []
        self.stop_on_import: Callable[[], None] = lambda: None
        self.warned: set[str | Uncaptured] = set()
        """The uncaptured clients (``aiohttp``, ``urllib3``) and uses already named (once
        per process each)."""


_PATCH = _Patch()


def _patch_async(
    module: Any, async_cls: type, *, over_aiohttp: bool = False
) -> tuple[type, str, Any]:
    """Capture (and replay) ``async_cls.handle_async_request``, a transport of ``module``
    (``over_aiohttp``: one that sends through aiohttp, see :func:`within_sdk_transport`)."""
    async_orig = async_cls.handle_async_request  # type: ignore[attr-defined]

    async def handle_async_request(self: Any, request: Any) -> Any:
        if boundary.current() is None:
            return await async_orig(self, request)
        name, normalized, adapter = _cross(module, request, await _aread_body(request), True)
        token = _sdk_transport.set(True) if over_aiohttp else None
        try:
            return await boundary.athrough(
                "http", name, normalized, lambda: async_orig(self, request), adapter
            )
        finally:
            if token is not None:
                _sdk_transport.reset(token)

    async_cls.handle_async_request = handle_async_request  # type: ignore[attr-defined]
    return (async_cls, "handle_async_request", async_orig)


_sdk_transport: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sandbox_sdk_transport", default=False
)


def within_sdk_transport() -> bool:
    """Whether an SDK's transport over aiohttp is sending the current request, recording it
    itself: aiohttp's own capture (:mod:`sandbox.capture.aiohttp_http`) leaves it be."""
    return _sdk_transport.get()


def _patch_aiohttp_transport(transport: ModuleType) -> None:
    """Patch the aiohttp transport of an SDK (an httpx2 transport over aiohttp)."""
    _PATCH.originals.append(
        _patch_async(transport.httpx, transport.AiohttpTransport, over_aiohttp=True)
    )


def _patch_litellm_transport(transport: ModuleType) -> None:
    """Patch litellm's transport over aiohttp (an httpx transport: its responses are
    httpx's)."""
    _PATCH.originals.append(
        _patch_async(transport.httpx, transport.LiteLLMAiohttpTransport, over_aiohttp=True)
    )


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _uncaptured_client(library: str) -> str:
    """The client making an uncaptured request through ``library`` (``urllib3``), read off
    the caller's stack, with its version."""
    callers: set[str] = set()
    frame: Any = sys._getframe(1)
    while frame is not None:
        callers.add(str(frame.f_globals.get("__name__", "")))
        frame = frame.f_back
    tops = {name.partition(".")[0] for name in callers}
    top = next((name for name in _URLLIB3_CALLERS if name in tops), "urllib3")
    return f"{top} {_version(top)}"


def warn_uncaptured(library: str | Uncaptured, depth: int = 2) -> None:
    """Say once per process, on stderr, that a run made a request through ``library``
    (``urllib3``, or a use of a captured client) that nothing records (its reply will be
    refused on replay). The sandbox's own requests (the Docker engine's, an object store's)
    are not the run's: whose the request is is read ``depth`` frames above this function's
    caller. Fails open: never raises into the agent."""
    with contextlib.suppress(Exception):
        now = boundary.current()
        if (
            library in _PATCH.warned
            or now is None
            or getattr(now, "replaying", False)
            or boundary.current_span() is not None  # inside a recorded call: replayed whole
            or asker(depth) == "sandbox"
        ):
            return
        _PATCH.warned.add(library)
        if isinstance(library, Uncaptured):
            name = f"{library.distribution} {_version(library.distribution)} {library.use}"
            advice = library.advice
        else:
            name = _uncaptured_client(library)
            advice = "use httpx"
        sys.stderr.write(
            f"sandbox: {name} is not captured: its calls will be refused on replay; {advice}\n"
        )


def _patch_urllib3(pool: ModuleType) -> None:
    """Watch ``urllib3.HTTPConnectionPool.urlopen`` (``requests``' and botocore's every
    request goes through it) for requests made inside a run."""
    cls = pool.HTTPConnectionPool
    original = cls.urlopen

    def urlopen(self: Any, *args: Any, **kwargs: Any) -> Any:
        warn_uncaptured("urllib3")
        return original(self, *args, **kwargs)

    cls.urlopen = urlopen
    _PATCH.originals.append((cls, "urlopen", original))


def _start_aiohttp_patches() -> Callable[[], None]:
    """Patch the SDKs' aiohttp transports (and watch urllib3's pools) when the agent
    imports them (at once if it has)."""
    patches: dict[str, Callable[[ModuleType], None]]
    patches = dict.fromkeys(AIOHTTP_TRANSPORTS, _patch_aiohttp_transport)
    patches[LITELLM_TRANSPORT] = _patch_litellm_transport
    patches[URLLIB3_POOL] = _patch_urllib3
    return when_imported(patches)


def _patch_module(module: Any) -> list[tuple[type, str, Any]]:
    sync_cls = module.HTTPTransport
    sync_orig = sync_cls.handle_request

    def handle_request(self: Any, request: Any) -> Any:
        if boundary.current() is None:
            return sync_orig(self, request)
        name, normalized, adapter = _cross(module, request, _read_body(request), False)
        return boundary.through("http", name, normalized, lambda: sync_orig(self, request), adapter)

    sync_cls.handle_request = handle_request
    return [
        (sync_cls, "handle_request", sync_orig),
        _patch_async(module, module.AsyncHTTPTransport),
    ]


def patch_httpx(modules: tuple[str, ...] = MODULES) -> Callable[[], None]:
    """Patch the transports of every importable module in ``modules``; return the undo
    function. Patches nest (counted): the last undo restores the originals."""
    with _PATCH.lock:
        if _PATCH.count == 0:
            found = False
            seen: set[type] = set()
            for name in modules:
                try:
                    module = importlib.import_module(name)
                except ImportError:
                    continue
                found = True
                if module.HTTPTransport in seen:  # one module aliased as the other
                    continue
                seen.add(module.HTTPTransport)
                _PATCH.originals.extend(_patch_module(module))
            _PATCH.stop_on_import = _start_aiohttp_patches()
            if not found:
                raise CaptureError(
                    f"none of {', '.join(modules)} is installed: cannot capture HTTP"
                )
        _PATCH.count += 1
    undone = False

    def undo() -> None:
        nonlocal undone
        with _PATCH.lock:
            if undone:
                return
            undone = True
            _PATCH.count -= 1
            if _PATCH.count == 0:
                _PATCH.stop_on_import()
                for cls, attr, original in reversed(_PATCH.originals):
                    setattr(cls, attr, original)
                _PATCH.originals.clear()

    return undo
