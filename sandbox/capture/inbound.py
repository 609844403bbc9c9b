"""What an HTTP request brings into a captured service run: its headers and its body, as
one ``state`` event (:data:`~sandbox.names.REQUEST_EVENT`) of the run, and its body made
bytes again for a replay to send (:func:`sandbox.capture.middleware.to_replay`).

The middlewares (:mod:`sandbox.capture.asgi`, :mod:`sandbox.capture.wsgi`) tee the body as
the application reads it (streaming stays streaming) and write the event once it is whole,
or when the request ends with the body not read to the end. Headers are redacted as an HTTP
call's are (``authorization``, cookies, credentials' names: placeholders, and their values secrets
everywhere in the run); the body is JSON when its type says JSON and it parses (then
redacted field by field with the rest of the event), else text, else base64. A body over
:data:`BODY_LIMIT` bytes is left out (its size kept): its replay cannot send it and says so.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydantic import JsonValue

from sandbox.capture.recorder import Recorder
from sandbox.errors import CaptureError
from sandbox.names import REQUEST_EVENT
from sandbox.snapshot.events import StateTransition
from sandbox.snapshot.hashing import ordered_json, read_json

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

BODY_LIMIT = 1 << 20
"""Bytes of a request body the run keeps (1 MiB): an upload larger than that is left out."""
NOT_SENT = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Recorded headers a replay does not send as they were: its client sets its own (the
host its own too, from the recorded one: :func:`origin`)."""


def origin(data: dict[str, JsonValue]) -> str:
    """``scheme://host`` the recorded request was sent to (its ``Host`` header: an app that
    checks it, Starlette's ``TrustedHostMiddleware``, sees the same); ``http://replay`` for
    a request recorded without."""
    headers = data.get("headers")
    host = headers.get("host") if isinstance(headers, dict) else None
    scheme = data.get("scheme") if data.get("scheme") in ("http", "https") else "http"
    return f"{scheme}://{host}" if isinstance(host, str) and host else "http://replay"


def body_fields(data: bytes, content_type: str) -> dict[str, JsonValue]:
    """How the event holds a body: ``json``, ``text`` or ``base64``; nothing for an empty
    one."""
    if not data:
        return {}
    if "json" in content_type.lower():
        try:
            return {"json": read_json(data)}
        except ValueError:
            pass
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def body_bytes(data: dict[str, JsonValue], text: Callable[[str], str] = str) -> bytes:
    """The body :func:`body_fields` recorded, as bytes to send again (JSON as compact JSON:
    the same value, not necessarily the same spacing), each text of it through ``text``
    (the replay's, which puts back the secrets the user supplied)."""
    if "left_out" in data:
        raise CaptureError(
            f"the request body ({data['left_out']} bytes) was over the {BODY_LIMIT} bytes a "
            "run keeps: it cannot be sent again"
        )
    if "json" in data:
        return ordered_json(_texts(data["json"], text))
    if isinstance(data.get("text"), str):
        return text(str(data["text"])).encode("utf-8")
    if isinstance(data.get("base64"), str):
        return base64.b64decode(str(data["base64"]))
    return b""


def _texts(value: JsonValue, text: Callable[[str], str]) -> JsonValue:
    """``value`` with each of its strings (keys too) through ``text``."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [_texts(v, text) for v in value]
    if isinstance(value, dict):
        return {text(k): _texts(v, text) for k, v in value.items()}
    return value


class RequestTee:
    """Records one request's headers and body (see the module documentation): wrap the
    application's ``receive`` with :meth:`receive` (or hand it what it reads of a WSGI
    body, :meth:`took`), call :meth:`end` when it answered. The
    event's fields are made (and the headers redacted) only if it leaves memory: a run held
    until it ends (``keep="failed"``) and let go makes none (:meth:`Recorder.emit_later`);
    the tee is what makes them."""

    __slots__ = (
        "_body",
        "_chunks",
        "_headers",
        "_recorder",
        "_scheme",
        "_size",
        "_whole",
        "_written",
    )

    def __init__(
        self, recorder: Recorder, headers: list[tuple[bytes, bytes]], scheme: str = "http"
    ) -> None:
        self._recorder = recorder
        self._headers = headers
        self._scheme = scheme
        self._chunks: list[bytes] = []
        self._body = b""
        self._size = 0
        self._whole = True
        self._written = False

    def receive(self, inner: Receive) -> Receive:
        """An ASGI app's ``receive``, teed."""

        async def receive() -> Message:
            message = await inner()
            if message.get("type") == "http.request":
                done = not message.get("more_body", False)
                self.took(bytes(message.get("body", b"")), done=done)
            return message

        return receive

    def took(self, chunk: bytes, *, done: bool) -> None:
        """The app read ``chunk`` of the body (``done``: its end)."""
        if self._written:
            return
        self._size += len(chunk)
        if self._size <= BODY_LIMIT:
            self._chunks.append(chunk)
        if done:
            self._write(whole=True)

    def end(self) -> None:
        """The request is answered: write its event if the body was not read to the end."""
        self._write(whole=False)

    def _write(self, *, whole: bool) -> None:
        if self._written:
            return
        self._written = True
        self._whole = whole
        self._body = b"".join(self._chunks) if self._size <= BODY_LIMIT else b""
        self._chunks = []
        size = self._size + sum(len(k) + len(v) for k, v in self._headers)
        try:
            self._recorder.emit_later(StateTransition, None, self, failed=False, size=size)
        except Exception as exc:  # a capture fails open (the fields made at once failed)
            self._recorder.damage(exc)

    def __call__(self, recorder: Recorder) -> dict[str, Any]:
        """The event's fields (see :meth:`Recorder.emit_later`)."""
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in self._headers]
        content_type = next((v for k, v in headers if k == "content-type"), "")
        body: dict[str, JsonValue] = {"left_out": self._size}
        if self._size <= BODY_LIMIT:
            body = body_fields(self._body, content_type)
        data: dict[str, JsonValue] = {
            "scheme": self._scheme,
            "headers": dict(recorder.redact_headers(headers)),
            **body,
        }
        if not self._whole:
            data["whole"] = False
        return {"name": REQUEST_EVENT, "target": "request", "data": data}
