"""Capture (and replay) of ``requests``: each exchange a session sends through its HTTP
adapter (``requests.adapters.HTTPAdapter.send``, which every ``requests.get``, session and
subclass of the adapter goes through) crosses the seam as an ``http`` call, recorded as an
httpx exchange is (:class:`~sandbox.capture.http.HTTPAdapter` makes its events: the same
fields, redaction and model-API recognition), and replayed as a ``requests.Response``
rebuilt from the recording. The body is read where ``requests`` reads it, once the adapter
answered (its content as ``requests`` gives it: decoded, so the recorded headers leave the
content encoding out); a response asked for as a stream (``stream=True``: a download, a
model's streamed lines) is teed as the caller reads it (``iter_content``, ``iter_lines``)
and recorded when read to the end or closed (or, still open, at the run's end), and its
replay streams the recorded bytes. Not captured, and named once on stderr (its reply is
refused on replay): a body sent from a file or a generator. The sandbox's own requests and
those over a unix socket (the Docker SDK's, ``http+docker://``) are not the run's.
"""

from __future__ import annotations

import contextlib
import datetime
import io
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sandbox.capture.http import Uncaptured, recorded_content
from sandbox.capture.onimport import Originals, class_patches
from sandbox.capture.prepared import WIRE, Answer, PreparedExchange, PreparedRequest, RawTee
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Outcome, RecordedError
from sandbox.snapshot.events import Event, HTTPExchange


class RequestsExchange(PreparedExchange):
    """One ``requests`` exchange: recorded once its content is read, replayed as a
    ``requests.Response`` of the adapter ``connection``."""

    __slots__ = ("_connection", "_stream")

    uncaptured = Uncaptured(
        "requests", "with a body from a file or a generator", "send the body as bytes"
    )

    def __init__(
        self,
        prepared: Any,
        request: PreparedRequest,
        body: bytes | None,
        parsed: Any,
        url: str,
        connection: Any = None,
        stream: bool = False,
    ) -> None:
        super().__init__(prepared, request, body, parsed, url)
        self._connection = connection
        self._stream = stream

    def record(self, call: Call, outcome: Outcome[Any], emitter: Any) -> Any:
        if outcome.error is not None:
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(outcome.error))
            return None
        response: Any = outcome.value
        if self._stream:  # read by the caller, as it likes: teed as it reads
            tee = RawTee(response.raw, self, call, emitter, Answer(response, WIRE))
            response.raw = tee
            emitter.defer(tee, tee.unfinished)
            return response
        try:
            content = response.content  # as Session.send reads it next, for a non-stream
        except Exception as exc:  # the body failed: the caller gets the same error
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(exc))
            raise
        self.emit_exchange(call, emitter, Answer(response, WIRE), content or b"", None)
        return response

    def record_replayed(self, call: Call, value: Any, emitter: Any) -> Any:
        self.emit_exchange(call, emitter, Answer(value, WIRE), value.content or b"", None)
        return value

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
        {k: v for k, v in event.response_headers.items() if k not in WIRE}
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

        return RequestsExchange.send(request, perform, connection=self, stream=stream)

    cls.send = send
    originals.append((cls, "send", original))


_PATCHING = class_patches(MODULE, patch)
