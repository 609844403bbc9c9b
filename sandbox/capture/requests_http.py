"""Capture (and replay) of ``requests``: each exchange a session sends through its HTTP
adapter (``requests.adapters.HTTPAdapter.send``, which every ``requests.get``, session and
subclass of the adapter goes through) crosses the seam as an ``http`` call, recorded as an
httpx exchange is (:class:`~sandbox.capture.http.HTTPAdapter` makes its events: the same
fields, redaction and model-API recognition), and replayed as a ``requests.Response``
rebuilt from the recording. The body is read where ``requests`` reads it, once the adapter
answered (its content as ``requests`` gives it: decoded, so the recorded headers leave the
content encoding out). Not captured, and named once on stderr (their replies are refused on
replay): a response asked for as a stream (``stream=True``) and a body sent from a file or
a generator. The sandbox's own requests and those over a unix socket (the Docker SDK's,
``http+docker://``) are not the run's.
"""

from __future__ import annotations

import contextlib
import datetime
import io
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx

from sandbox.capture.http import (
    STREAMED,
    HTTPAdapter,
    crossing,
    recorded_content,
    warn_uncaptured,
)
from sandbox.capture.onimport import Originals, class_patches
from sandbox.capture.origin import asker
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Outcome, RecordedError
from sandbox.snapshot.events import Event, HTTPExchange

SCHEMES = ("http://", "https://")
"""What is recorded: requests over the network (not ``http+docker://``, a unix socket's)."""
_LEFT_OUT = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Response headers that describe the bytes on the wire, not the content recorded."""


class _Headers:
    """What :class:`HTTPAdapter` reads of a set of headers (httpx's shape), made from
    ``requests``' own (text names and values)."""

    __slots__ = ("_values", "raw")
    encoding = _encoding = "latin-1"
    """How the raw names and values are encoded (httpx's two spellings of it)."""

    def __init__(self, headers: Any, left_out: frozenset[str] = frozenset()) -> None:
        self._values = {
            str(k).lower(): v.decode("latin-1") if isinstance(v, bytes) else str(v)
            for k, v in headers.items()
        }
        for name in left_out:
            self._values.pop(name, None)
        self.raw = [
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in self._values.items()
        ]

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name.lower(), default)

    def items(self) -> Any:
        return self._values.items()


class Answer:
    """What :class:`HTTPAdapter` reads of a response: its status and headers (but those
    ``left_out``: by default the ones about the bytes on the wire, ``requests`` giving the
    content decoded)."""

    __slots__ = ("headers", "status_code")

    def __init__(self, response: Any, left_out: frozenset[str] = _LEFT_OUT) -> None:
        self.status_code = int(response.status_code)
        self.headers = _Headers(response.headers, left_out)


class PreparedRequest:
    """What the seam and :class:`HTTPAdapter` read of a prepared request."""

    __slots__ = ("headers", "method", "url")

    def __init__(self, prepared: Any) -> None:
        self.method = str(prepared.method or "GET").upper()
        self.url = httpx.URL(str(prepared.url))
        self.headers = _Headers(prepared.headers)


class RequestsExchange(HTTPAdapter):
    """One ``requests`` exchange: recorded once its content is read, replayed as a
    ``requests.Response``."""

    __slots__ = ("_connection", "_prepared")

    def __init__(
        self, prepared: Any, request: PreparedRequest, body: bytes | None, parsed: Any, url: str
    ) -> None:
        super().__init__(None, request, body, False, parsed, url)
        self._prepared = prepared
        self._connection: Any = None

    @classmethod
    def of(cls, prepared: Any, body: bytes | None, connection: Any) -> tuple[str, Any, Any]:
        """The crossing of ``prepared`` sent through the adapter ``connection``: its name,
        its normalized request and the exchange recording it."""
        request = PreparedRequest(prepared)
        name, normalized, parsed, url = crossing(request, body)
        exchange = cls(prepared, request, body, parsed, url)
        exchange._connection = connection
        return name, normalized, exchange

    def record(self, call: Call, outcome: Outcome[Any], emitter: Any) -> Any:
        if outcome.error is not None:
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(outcome.error))
            return None
        response: Any = outcome.value
        try:
            content = response.content  # as Session.send reads it next, for a non-stream
        except Exception as exc:  # the body failed: the caller gets the same error
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(exc))
            raise
        self.emit_exchange(call, emitter, Answer(response), content or b"", None)
        return response

    def record_replayed(self, call: Call, value: Any, emitter: Any) -> Any:
        self.emit_exchange(call, emitter, Answer(value), value.content or b"", None)
        return value

    def send_instead(self, data: bytes) -> None:
        self._prepared.body = data
        self._prepared.headers["Content-Length"] = str(len(data))

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, HTTPExchange)
        if event.error is not None and event.status is None:
            raise RecordedError(event.error)
        return _response(self._prepared, self._connection, event, blobs)


def _response(prepared: Any, connection: Any, event: HTTPExchange, blobs: BlobReader) -> Any:
    """The ``requests.Response`` the recorded exchange ``event`` answered ``prepared`` with."""
    from requests.models import Response
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    content = recorded_content(event, blobs)
    response = Response()
    response.status_code = event.status or 200
    response.headers = CaseInsensitiveDict(
        {k: v for k, v in event.response_headers.items() if k not in _LEFT_OUT}
    )
    response.headers["content-length"] = str(len(content))
    response._content = content
    vars(response)["_content_consumed"] = True
    response.raw = io.BytesIO(content)
    response.url = str(prepared.url)
    response.request = prepared
    response.connection = connection
    response.encoding = get_encoding_from_headers(response.headers)
    response.reason = _reason(response.status_code)
    response.elapsed = datetime.timedelta(seconds=event.duration)
    return response


def _reason(status: int) -> str:
    with contextlib.suppress(ValueError):
        from http import HTTPStatus

        return HTTPStatus(status).phrase
    return ""


def _body(prepared: Any) -> tuple[bool, bytes | None]:
    """Whether the request's body can be recorded (not one sent from a file or a
    generator), and it as bytes (``None``: none)."""
    body = prepared.body
    if body is None or isinstance(body, bytes):
        return True, body
    if isinstance(body, str):
        return True, body.encode("utf-8")
    return False, None


MODULE = "requests.adapters"
"""``requests``' HTTP adapters, patched when the agent imports them (at once if it has)."""


def patch_requests() -> Callable[[], None]:
    """Capture (and replay) ``requests`` from now on (installed once for every holder);
    return the release."""
    return _PATCHING.acquire()


def patch(adapters: ModuleType, originals: Originals) -> None:
    """Capture (and replay) ``adapters.HTTPAdapter.send``; the original is appended to
    ``originals`` (for the undo)."""
    cls = adapters.HTTPAdapter
    original = cls.send

    def send(self: Any, request: Any, stream: bool = False, **kwargs: Any) -> Any:
        def perform() -> Any:
            return original(self, request, stream=stream, **kwargs)

        now = boundary.current()
        url = str(request.url or "")
        if now is None or not url.startswith(SCHEMES) or asker(1) == "sandbox":
            return perform()  # a unix socket's (the Docker SDK's), the sandbox's own
        whole, body = _body(request)
        if stream or not whole:
            warn_uncaptured(STREAMED)  # refused on replay, as urllib3's own requests are
            with boundary.bypassed():  # named once: not again by urllib3's watch
                return perform()
        try:
            name, normalized, exchange = RequestsExchange.of(request, body, self)
        except Exception:  # fails open (on replay the guard refuses what goes out)
            return perform()
        return boundary.through("http", name, normalized, perform, exchange)

    cls.send = send
    originals.append((cls, "send", original))


_PATCHING = class_patches(MODULE, patch)
