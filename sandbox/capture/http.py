"""Zero-code capture of HTTP and model calls, at the httpx transport.

:func:`patch_httpx` wraps ``HTTPTransport.handle_request`` and
``AsyncHTTPTransport.handle_async_request`` of ``httpx`` and of ``httpx2`` (which the
official ``openai`` and ``anthropic`` SDKs use), so any client built on them is captured
unchanged, and the aiohttp transport those SDKs ship (``DefaultAioHttpClient``) when aiohttp
is installed. A request an agent makes straight through an ``aiohttp.ClientSession`` (the
async client of ``google-genai``, say) is not captured, nor one through urllib3
(``requests``, botocore): the first one in a run, outside any recorded call, is named once
on stderr with its version (:func:`_warn_uncaptured`) so the gap shows at capture, not as a
refused call at replay. Each exchange crosses the seam as an ``http`` call: the
request (method, URL, body) is the normalized request; the response body is teed while the
caller reads it (streaming keeps streaming) and the ``http`` event is written when the body
is finished or closed. Exchanges a model API of the registry recognises
(:func:`sandbox.seam.llm.recognise`) also get an ``llm`` event (model, parameters, messages,
tools, assembled response, usage, provider metadata).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import json
import sys
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any, Protocol

from pydantic import JsonValue

from sandbox.capture.onimport import when_imported
from sandbox.capture.origin import asker
from sandbox.errors import CaptureError
from sandbox.seam import boundary, llm
from sandbox.seam.boundary import BlobReader, Call, Outcome, RecordedError
from sandbox.snapshot.events import BlobRef, ErrorInfo, Event, HTTPExchange, LLMCall
from sandbox.snapshot.normalize import normalize_url, request_fingerprint

MODULES = ("httpx", "httpx2")
"""httpx-compatible modules patched when importable."""
AIOHTTP_TRANSPORTS = frozenset(
    f"{sdk}._vendor.httpx_aiohttp.transport" for sdk in ("openai", "anthropic")
)
"""The aiohttp transports (``DefaultAioHttpClient``) the SDKs ship, patched when imported."""
AIOHTTP_CLIENT = "aiohttp.client"
"""aiohttp's own client, watched (not captured) when imported: see :func:`_warn_uncaptured`."""
URLLIB3_POOL = "urllib3.connectionpool"
"""urllib3's connection pools (under ``requests`` and botocore), watched (not captured) when
imported, as aiohttp's client is."""
_URLLIB3_CALLERS = ("requests", "botocore", "urllib3")


class HTTPEmitter(boundary.Emitter, Protocol):
    blob_threshold: int

    def elapsed(self) -> float: ...
    def redact_headers(self, headers: list[tuple[str, str]]) -> dict[str, str]: ...


def _body(
    data: bytes, content_type: str, emitter: HTTPEmitter, parsed: JsonValue = None
) -> tuple[JsonValue, BlobRef | None]:
    """A body as JSON when it is JSON, as text when it is text, else (or when large) a blob.
    ``parsed``: the body already read as JSON, if it was."""
    media = content_type.split(";")[0].strip().lower() or "application/octet-stream"
    if not data:
        return None, None
    if len(data) > emitter.blob_threshold:
        return None, emitter.store_payload(data, media)
    if "json" in media:
        if parsed is not None:
            return parsed, None
        with contextlib.suppress(ValueError):
            parsed = json.loads(data)
            return parsed, None
    if media.startswith("text/") or "json" in media or "x-www-form-urlencoded" in media:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("utf-8"), None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, emitter.store_payload(data, media)


def _header_items(headers: Any) -> list[tuple[str, str]]:
    """``headers.multi_items()`` (names lowered, in order, repeated names kept), decoded in
    one pass over the raw pairs."""
    encoding = headers.encoding
    return [(key.lower().decode(encoding), value.decode(encoding)) for key, value in headers.raw]


def _header(items: list[tuple[str, str]], name: str) -> str:
    """The value of header ``name`` (lower case) as ``headers.get`` gives it: repeated ones
    joined with commas, ``""`` when absent."""
    return ", ".join(value for key, value in items if key == name)


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
    replay rebuilds a response of the same httpx module from the recorded event."""

    def __init__(
        self,
        module: Any,
        request: Any,
        body: bytes | None,
        is_async: bool,
        parsed: JsonValue = None,
    ) -> None:
        self.module = module
        self.request = request
        self.body = body
        self.is_async = is_async
        self.parsed = parsed
        """The body as the request's JSON holds it (:func:`_request_json`), when it is JSON."""

    # --- capture -------------------------------------------------------------------------

    def record(self, call: Call, outcome: Outcome[Any], emitter: Any) -> Any:
        if outcome.error is not None:
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(outcome.error))
            return None
        response: Any = outcome.value
        chunks: list[bytes] = []
        done = threading.Event()

        def finish(error: ErrorInfo | None = None) -> None:
            if done.is_set():
                return
            done.set()
            emitter.undefer(tee)
            self.emit_exchange(call, emitter, response, b"".join(chunks), error)

        def flush_at_end() -> None:
            finish(ErrorInfo(type="IncompleteRead", message="body not read to the end"))

        tee: Any
        if self.is_async:
            tee = _async_tee(self.module)(response.stream, chunks, finish)
        else:
            tee = _sync_tee(self.module)(response.stream, chunks, finish)
        response.stream = tee
        emitter.defer(tee, flush_at_end)
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
        response it rebuilt, so the replayed run records the exchange as capture does."""
        req = self.request
        url = str(req.url)
        req_items = _header_items(req.headers)
        req_headers = emitter.redact_headers(req_items)
        req_body, req_blob = _body(
            self.body or b"", _header(req_items, "content-type"), emitter, self.parsed
        )
        fields: dict[str, Any] = {
            "method": req.method,
            "url": url,
            "request_headers": req_headers,
            "request_body": req_body,
            "request_blob": req_blob,
            "error": error,
            "duration": emitter.elapsed() - call.started,
        }
        streamed = False
        resp_body: JsonValue = None
        if response is not None:
            resp_items = _header_items(response.headers)
            ctype = _header(resp_items, "content-type")
            streamed = "text/event-stream" in ctype
            data = _decode(raw, _header(resp_items, "content-encoding"))
            resp_body, resp_blob = _body(data, ctype, emitter)
            fields.update(
                status=response.status_code,
                response_headers=emitter.redact_headers(resp_items),
                response_body=resp_body,
                response_blob=resp_blob,
                streamed=streamed,
            )
            if resp_blob is not None and resp_blob.media_type.startswith("text/"):
                resp_body = data.decode("utf-8", "replace")
        emitter.emit(HTTPExchange, call, **fields)
        api = llm.recognise(req.method, url, req.headers)
        if api is not None:
            self._emit_llm(api, call, emitter, req_body, resp_body, streamed, response, error)

    def _emit_llm(
        self,
        api: llm.LLMApi,
        call: Call,
        emitter: HTTPEmitter,
        req_body: JsonValue,
        resp_body: JsonValue,
        streamed: bool,
        response: Any,
        error: ErrorInfo | None,
    ) -> None:
        if req_body is None and self.body:
            with contextlib.suppress(ValueError):
                req_body = json.loads(self.body)
        parsed = api.parse_request(str(self.request.url), req_body)
        answer = llm.LLMResponse()
        if response is not None and response.status_code < 400:
            answer = api.parse_response(resp_body, streamed)
        elif response is not None and error is None:
            error = ErrorInfo(type=f"HTTP {response.status_code}", message=str(resp_body)[:500])
        request = parsed.meaning()
        emitter.emit(
            LLMCall,
            None,
            name=parsed.model,
            fingerprint=request_fingerprint("llm", parsed.model, request),
            task=call.task,
            parent_span=call.span,
            attempt=call.attempt,
            provider=parsed.provider,
            model=parsed.model,
            messages=parsed.messages,
            params=parsed.params,
            tools=parsed.tools,
            response=answer.response or None,
            usage=answer.usage,
            provider_meta={"api": api.name, **answer.meta},
            streamed=streamed,
            error=error,
            duration=emitter.elapsed() - call.started,
        )

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
        self.request.headers["content-length"] = str(len(data))
        self.request.stream = self.module.ByteStream(data)
        self.request._content = data
        self.body = data
        self.parsed = None  # read again from the body sent

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, HTTPExchange)
        if event.error is not None and event.status is None:
            raise RecordedError(event.error)
        if event.response_blob is not None:
            content = blobs(event.response_blob.sha256)
        elif isinstance(event.response_body, str):
            content = event.response_body.encode()
        elif event.response_body is None:
            content = b""
        else:
            content = json.dumps(event.response_body).encode()
        headers = {
            k: v
            for k, v in event.response_headers.items()
            if k not in {"content-length", "content-encoding", "transfer-encoding"}
        }
        return self.module.Response(
            event.status or 200, headers=headers, content=content, request=self.request
        )


@functools.cache
def _sync_tee(module: Any) -> type:
    """The tee stream class of ``module`` (made once per module)."""
    base = module.SyncByteStream

    class TeeStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, chunks: list[bytes], finish: Callable[..., None]) -> None:
            self._inner = inner
            self._chunks = chunks
            self._finish = finish

        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in self._inner:
                    self._chunks.append(chunk)
                    yield chunk
            except BaseException as exc:
                self._finish(boundary.error_info(exc))
                raise
            self._finish()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._finish()

    return TeeStream


@functools.cache
def _async_tee(module: Any) -> type:
    """The async tee stream class of ``module`` (made once per module)."""
    base = module.AsyncByteStream

    class AsyncTeeStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, chunks: list[bytes], finish: Callable[..., None]) -> None:
            self._inner = inner
            self._chunks = chunks
            self._finish = finish

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._inner:
                    self._chunks.append(chunk)
                    yield chunk
            except BaseException as exc:
                self._finish(boundary.error_info(exc))
                raise
            self._finish()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._finish()

    return AsyncTeeStream


def _read_json(body: bytes | None) -> tuple[JsonValue, bool]:
    """The body as JSON and ``True``, else as text and ``False``."""
    if not body:
        return None, False
    try:
        return json.loads(body), True
    except ValueError:
        return body.decode("utf-8", "replace"), False


def _request_json(request: Any, parsed: JsonValue) -> dict[str, JsonValue]:
    return {"method": request.method, "url": normalize_url(str(request.url)), "body": parsed}


def _name(request: Any) -> str:
    url = request.url
    return f"{request.method} {url.scheme}://{url.netloc.decode()}{url.path}"


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
        self.warned: set[str] = set()
        """The uncaptured clients (``aiohttp``, ``urllib3``) already named (once per
        process each)."""


_PATCH = _Patch()


def _patch_async(module: Any, async_cls: type) -> tuple[type, str, Any]:
    """Capture (and replay) ``async_cls.handle_async_request``, a transport of ``module``."""
    async_orig = async_cls.handle_async_request  # type: ignore[attr-defined]

    async def handle_async_request(self: Any, request: Any) -> Any:
        if boundary.current() is None:
            return await async_orig(self, request)
        body = await _aread_body(request)
        parsed, is_json = _read_json(body)
        adapter = HTTPAdapter(module, request, body, True, parsed if is_json else None)
        return await boundary.athrough(
            "http",
            _name(request),
            _request_json(request, parsed),
            lambda: async_orig(self, request),
            adapter,
        )

    async_cls.handle_async_request = handle_async_request  # type: ignore[attr-defined]
    return (async_cls, "handle_async_request", async_orig)


def _patch_aiohttp_transport(transport: ModuleType) -> None:
    """Patch the aiohttp transport of an SDK (an httpx2 transport over aiohttp)."""
    _PATCH.originals.append(_patch_async(transport.httpx, transport.AiohttpTransport))


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _uncaptured_client(library: str) -> str:
    """The client making an uncaptured request through ``library`` (``aiohttp`` or
    ``urllib3``), read off the caller's stack, with its version."""
    callers: set[str] = set()
    frame: Any = sys._getframe(1)
    while frame is not None:
        callers.add(str(frame.f_globals.get("__name__", "")))
        frame = frame.f_back
    tops = {name.partition(".")[0] for name in callers}
    if library == "aiohttp":
        if any(name.startswith("google.genai") for name in callers):
            return f"google-genai {_version('google-genai')} async client (aiohttp)"
        return f"aiohttp {_version('aiohttp')} ClientSession request"
    top = next((name for name in _URLLIB3_CALLERS if name in tops), "urllib3")
    return f"{top} {_version(top)}"


def _warn_uncaptured(library: str) -> None:
    """Say once per process, on stderr, that a run made a request through ``library``
    (``aiohttp``, ``urllib3``) that nothing records (its reply will be refused on replay).
    The sandbox's own requests (the Docker engine's, an object store's) are not the run's.
    Fails open: never raises into the agent."""
    with contextlib.suppress(Exception):
        now = boundary.current()
        if (
            library in _PATCH.warned
            or now is None
            or getattr(now, "replaying", False)
            or boundary.current_span() is not None  # inside a recorded call: replayed whole
            or asker(2) == "sandbox"
        ):
            return
        _PATCH.warned.add(library)
        name = _uncaptured_client(library)
        advice = "use the sync client" if name.startswith("google-genai") else "use httpx"
        sys.stderr.write(
            f"sandbox: {name} is not captured: its calls will be refused on replay; {advice}\n"
        )


def _patch_aiohttp_client(client: ModuleType) -> None:
    """Watch ``aiohttp.ClientSession._request`` for requests made inside a run."""
    session = client.ClientSession
    original = session._request

    async def _request(self: Any, *args: Any, **kwargs: Any) -> Any:
        _warn_uncaptured("aiohttp")
        return await original(self, *args, **kwargs)

    session._request = _request
    _PATCH.originals.append((session, "_request", original))


def _patch_urllib3(pool: ModuleType) -> None:
    """Watch ``urllib3.HTTPConnectionPool.urlopen`` (``requests``' and botocore's every
    request goes through it) for requests made inside a run."""
    cls = pool.HTTPConnectionPool
    original = cls.urlopen

    def urlopen(self: Any, *args: Any, **kwargs: Any) -> Any:
        _warn_uncaptured("urllib3")
        return original(self, *args, **kwargs)

    cls.urlopen = urlopen
    _PATCH.originals.append((cls, "urlopen", original))


def _start_aiohttp_patches() -> Callable[[], None]:
    """Patch the SDKs' aiohttp transports (and watch aiohttp's own client and urllib3's
    pools) when the agent imports them (at once if it has)."""
    patches: dict[str, Callable[[ModuleType], None]]
    patches = dict.fromkeys(AIOHTTP_TRANSPORTS, _patch_aiohttp_transport)
    patches[AIOHTTP_CLIENT] = _patch_aiohttp_client
    patches[URLLIB3_POOL] = _patch_urllib3
    return when_imported(patches)


def _patch_module(module: Any) -> list[tuple[type, str, Any]]:
    sync_cls = module.HTTPTransport
    sync_orig = sync_cls.handle_request

    def handle_request(self: Any, request: Any) -> Any:
        if boundary.current() is None:
            return sync_orig(self, request)
        body = _read_body(request)
        parsed, is_json = _read_json(body)
        adapter = HTTPAdapter(module, request, body, False, parsed if is_json else None)
        return boundary.through(
            "http",
            _name(request),
            _request_json(request, parsed),
            lambda: sync_orig(self, request),
            adapter,
        )

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
