"""Capture (and replay) of botocore, under boto3: each request a client sends through its
HTTP session (``botocore.httpsession.URLLib3Session.send``, which every service's client
goes through: S3, DynamoDB, SQS, a Bedrock model) crosses the seam as an ``http`` call,
recorded as an httpx exchange is (:class:`~sandbox.capture.http.HTTPAdapter` makes its
events: the same fields and redaction; the request's signature and security token are
headers like any credential). A JSON API's operation, which its ``X-Amz-Target`` header
names (DynamoDB's ``GetItem`` and ``DeleteItem`` send the same body to the same URL), is
part of the crossing's name. A body botocore reads at once is recorded as it returns; one
it hands over as a stream (an S3 object, a model's event stream) is teed as the caller
reads it and recorded when read to the end or closed (or, still open, at the run's end).
A request body from a file is read and rewound (an s3transfer chunk's progress quiet
meanwhile); one over 16 MiB, or that cannot be rewound, is not captured (named once on
stderr, refused on replay). Replayed as an ``AWSResponse`` over the recorded bytes, a file
body read to its end as sending it would. The sandbox's own requests (its S3 store) are not
the run's.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sandbox.capture.http import Uncaptured, recorded_content
from sandbox.capture.onimport import Originals, class_patches
from sandbox.capture.prepared import WIRE, Answer, PreparedExchange, RawTee
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Outcome, RecordedError
from sandbox.snapshot.events import Event, HTTPExchange

BODY_LIMIT = 16 * 1024 * 1024
"""The largest request body read from a file to be recorded."""


class BotocoreExchange(PreparedExchange):
    """One botocore exchange: recorded once its body is read, replayed as an
    ``AWSResponse``."""

    __slots__ = ()

    uncaptured = Uncaptured(
        "botocore", "with a body over 16 MiB or not rewindable", "send the body as bytes"
    )

    @staticmethod
    def body_of(prepared: Any) -> tuple[bool, bytes | None]:
        return _body(prepared)

    def crossing_name(self, name: str) -> str:
        """With the operation a JSON API's ``X-Amz-Target`` names."""
        target = self.request_headers.get("x-amz-target")
        return f"{name} {target}" if target else name

    def record(self, call: Call, outcome: Outcome[Any], emitter: Any) -> Any:
        if outcome.error is not None:
            self.emit_exchange(call, emitter, None, b"", boundary.error_info(outcome.error))
            return None
        response: Any = outcome.value
        answer = Answer(response, frozenset())
        read = vars(response).get("_content")
        if read is not None:  # read whole inside send (not a streamed output)
            self.emit_exchange(call, emitter, answer, read, None)
            return response
        tee = RawTee(response.raw, self, call, emitter, answer)
        response.raw = tee
        emitter.defer(tee, tee.unfinished)
        return response

    def record_replayed(self, call: Call, value: Any, emitter: Any) -> Any:
        content = vars(value).get("_content")
        if content is None:
            content = value.raw.read()
            value.raw = _raw(content, value.status_code, dict(value.headers))
        self.emit_exchange(call, emitter, Answer(value, frozenset()), content, None)
        return value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, HTTPExchange)
        if event.error is not None and event.status is None:
            raise RecordedError(event.error)
        from botocore.awsrequest import AWSResponse

        _sent(self._prepared.body)
        content = recorded_content(event, blobs)
        status = event.status or 200
        headers: Any = {k: v for k, v in event.response_headers.items() if k not in WIRE}
        headers["content-length"] = str(len(content))
        response = AWSResponse(self.url, status, headers, _raw(content, status, headers))
        if not self._prepared.stream_output:
            response.content  # noqa: B018 (read at once, as send does)
        return response


def _sent(body: Any) -> None:
    """Read a file body to its end, as sending it would (what the file reports of its
    progress, s3transfer's callbacks, is as at capture)."""
    if body is None or isinstance(body, (bytes, bytearray, memoryview, str)):
        return
    with contextlib.suppress(Exception):
        while body.read(64 * 1024):
            pass


def _raw(content: bytes, status: int, headers: dict[str, str]) -> Any:
    """A urllib3 response whose body is ``content``."""
    from urllib3.response import HTTPResponse

    return HTTPResponse(
        body=io.BytesIO(content),
        headers=headers,
        status=status,
        preload_content=False,
        decode_content=False,
    )


def _body(prepared: Any) -> tuple[bool, bytes | None]:
    """Whether the request's body can be recorded, and it as bytes (``None``: none). A
    file's is read and the file put back where it was, whatever happens; one that reports
    its progress as it is read (s3transfer's chunks of an upload) is told it is not being
    sent meanwhile, as botocore tells it when it reads the body to sign it."""
    body = prepared.body
    if body is None or isinstance(body, bytes):
        return True, body
    if isinstance(body, (bytearray, memoryview)):
        return True, bytes(body)
    if isinstance(body, str):
        return True, body.encode("utf-8")
    try:
        where = body.tell()
    except Exception:
        return False, None
    quiet = getattr(body, "signal_not_transferring", None)
    loud = getattr(body, "signal_transferring", None)
    if not getattr(body, "_callbacks_enabled", True):  # quiet already: left so
        quiet = loud = None
    try:
        if quiet is not None:
            quiet()
        body.seek(0, io.SEEK_END)
        if body.tell() - where > BODY_LIMIT:
            return False, None
        body.seek(where)
        data = body.read()
    except Exception:
        return False, None
    finally:
        with contextlib.suppress(Exception):
            body.seek(where)
        if loud is not None:
            with contextlib.suppress(Exception):
                loud()
    return True, data if isinstance(data, bytes) else str(data).encode("utf-8")


MODULE = "botocore.httpsession"
"""botocore's HTTP session, patched when the agent imports it (at once if it has)."""


def patch_botocore() -> Callable[[], None]:
    """Capture (and replay) botocore from now on (installed once for every holder); return
    the release."""
    return _PATCHING.acquire()


def patch(session: ModuleType, originals: Originals) -> None:
    """Capture (and replay) ``session.URLLib3Session.send``; the original is appended to
    ``originals`` (for the undo)."""
    cls = session.URLLib3Session
    original = cls.send

    def send(self: Any, request: Any) -> Any:
        return BotocoreExchange.send(request, lambda: original(self, request))

    cls.send = send
    originals.append((cls, "send", original))


_PATCHING = class_patches(MODULE, patch)
