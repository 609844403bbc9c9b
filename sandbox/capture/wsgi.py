"""A WSGI middleware that captures each HTTP request of an agent service as its own run (Flask,
Django, any WSGI app), as :mod:`sandbox.capture.asgi` does for ASGI ones::

    from sandbox.capture.wsgi import CaptureWSGIMiddleware

    app.wsgi_app = CaptureWSGIMiddleware(app.wsgi_app, keep="failed")     # Flask
    application = CaptureWSGIMiddleware(get_wsgi_application(), keep="failed")  # Django

Each request is one :func:`sandbox.capture.run`, named ``METHOD /path`` (``name=``: a function
of the environ for another), open while the app answers and while the server reads its
answer (until the server closes it, as WSGI servers do); failed when the app raises, answers
with a status of 500 or above (``failed_status=``; a Flask app answers an exception it
caught with a 500), or calls :func:`sandbox.capture.mark_failed`. Its labels hold the
request line and its log the request's scheme, headers (redacted) and body as the app read
it (:mod:`sandbox.capture.inbound`), as the ASGI middleware's do; other settings are
``capture.run``'s. Given no entrypoint, it records where a module holds the app (``app``, a
Flask object whose ``wsgi_app`` it wraps, or itself) and the replay sends the recorded
request through it (:func:`replay_wsgi_request`); or give it an entrypoint that calls
``replay_wsgi_request(app)``.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

from sandbox.capture.inbound import RequestTee
from sandbox.capture.middleware import Replayed, ServiceCapture, answered, to_replay
from sandbox.capture.recorder import Recorder
from sandbox.capture.run import run
from sandbox.capture.whereis import own_attributes

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def route_name(environ: Environ) -> str:
    return f"{environ.get('REQUEST_METHOD', 'GET')} {environ.get('PATH_INFO', '/') or '/'}"


def _code(status_line: str) -> int:
    """The status code of a WSGI status line (``"500 INTERNAL SERVER ERROR"``)."""
    return int(str(status_line).split(" ", 1)[0])


def _headers(environ: Environ) -> list[tuple[bytes, bytes]]:
    """The request's headers as ASGI gives them (lower-case names, latin-1 bytes)."""
    out = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:].replace("_", "-").lower()
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = key.replace("_", "-").lower()
        else:
            continue
        out.append((name.encode("latin-1"), str(value).encode("latin-1", "replace")))
    return out


class _Input:
    """``wsgi.input`` as the app reads it, each part read handed to the request's tee (the
    body is whole at its end, or once ``length`` bytes, its ``Content-Length``, are read)."""

    def __init__(self, inner: Any, tee: RequestTee, length: int | None) -> None:
        self._inner = inner
        self._tee = tee
        self._left = length

    def _took(self, data: bytes, to_the_end: bool) -> bytes:
        if self._left is not None:
            self._left -= len(data)
        done = not data or to_the_end or (self._left is not None and self._left <= 0)
        self._tee.took(data, done=done)
        return data

    def read(self, size: int | None = -1) -> bytes:
        whole = size is None or size < 0
        return self._took(self._inner.read() if whole else self._inner.read(size), whole)

    def readline(self, size: int | None = -1) -> bytes:
        return self._took(
            self._inner.readline() if size is None else self._inner.readline(size), False
        )

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        read = self._inner.readlines
        lines: list[bytes] = list(read() if hint is None else read(hint))
        self._took(b"".join(lines), hint is None or hint <= 0)
        return lines

    def __iter__(self) -> Iterator[bytes]:
        for line in self._inner:
            yield self._took(line, False)
        self._took(b"", True)


class _Answer:
    """The app's answer as the server reads it: the run ends when the server closes it (or
    when reading it raises)."""

    def __init__(
        self, inner: Iterable[bytes], finish: Callable[[BaseException | None], None]
    ) -> None:
        self._inner = inner
        self._finish = finish

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._inner
        except BaseException as exc:
            self._finish(exc)
            raise

    def close(self) -> None:
        try:
            close = getattr(self._inner, "close", None)
            if close is not None:
                close()
        finally:
            self._finish(None)


class CaptureWSGIMiddleware(ServiceCapture):
    """Capture each HTTP request of the WSGI ``app`` as a run (see the module
    documentation)."""

    route_name = staticmethod(route_name)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if not self._found:  # the app, or a Flask object whose wsgi_app this is
            self._settle(self, via="wsgi_app")
        labels = self.labels(
            str(environ.get("REQUEST_METHOD", "GET")),
            str(environ.get("PATH_INFO", "/") or "/"),
            str(environ.get("QUERY_STRING", "")),
        )
        capture = run(self.name(environ), **{**self.settings, "labels": labels})
        rec = capture.__enter__()
        status: list[int] = []

        def watched(line: str, headers: Any, exc_info: Any = None) -> Any:
            status[:] = [_code(line)]
            return start_response(line, headers, exc_info)

        tee: RequestTee | None = None
        if not rec.replaying:  # a replay sends the recorded request itself: it records it
            tee = RequestTee(rec, _headers(environ), str(environ.get("wsgi.url_scheme", "http")))
            length = str(environ.get("CONTENT_LENGTH") or "")
            given = environ.get("wsgi.input", io.BytesIO())
            environ["wsgi.input"] = _Input(given, tee, int(length) if length.isdigit() else None)
        finish = _Finish(capture, rec, tee, status, self.failed_status)
        try:
            result = self.app(environ, watched)
        except BaseException as exc:
            finish(exc)
            raise
        return _Answer(result, finish)


class _Finish:
    """Ends a request's run once: its tee's event, its answer's status, its exception."""

    def __init__(
        self,
        capture: Any,
        rec: Recorder,
        tee: RequestTee | None,
        status: list[int],
        failed_status: int,
    ) -> None:
        self._capture = capture
        self._rec = rec
        self._tee = tee
        self._status = status
        self._failed_status = failed_status
        self._lock = threading.Lock()
        self._done = False

    def __call__(self, exc: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            if self._tee is not None:
                self._tee.end()
            if self._status and exc is None:
                answered(self._rec, self._status[0], self._failed_status)
        finally:
            tb: TracebackType | None = exc.__traceback__ if exc is not None else None
            self._capture.__exit__(type(exc) if exc is not None else None, exc, tb)


def captures(app: object) -> bool:
    """Whether ``app`` is a WSGI app that captures its requests: a
    :class:`CaptureWSGIMiddleware`, or an app (Flask) whose own ``wsgi_app`` is one (read
    without running any code of ``app``'s class)."""
    return isinstance(app, CaptureWSGIMiddleware) or isinstance(
        own_attributes(app).get("wsgi_app"), CaptureWSGIMiddleware
    )


def replay_wsgi_request(app: WSGIApp) -> int:
    """Send the request of the run being replayed through the WSGI ``app`` again (its
    request line, scheme, host, headers and body); return the status it answered, which
    marks the replayed run failed at or above the middleware's failed status, as
    :func:`sandbox.capture.asgi.replay_request` does."""
    request = to_replay()
    status: list[int] = []

    def start_response(line: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], None]:
        status[:] = [_code(line)]
        return lambda _data: None

    answer = app(_environ(request), start_response)
    try:
        for _ in answer:
            pass
    finally:
        close = getattr(answer, "close", None)
        if close is not None:
            close()
    code = status[0] if status else 500
    request.answered(code)
    return code


def _environ(request: Replayed) -> Environ:
    scheme, _, host = request.origin.partition("://")
    name, _, port = host.partition(":")
    environ: Environ = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": request.path,
        "QUERY_STRING": request.query,
        "SERVER_NAME": name,
        "SERVER_PORT": port or ("443" if scheme == "https" else "80"),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(request.body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "HTTP_HOST": host,
    }
    for key, value in request.headers:
        if key == "content-type":
            environ["CONTENT_TYPE"] = value
        else:
            environ["HTTP_" + key.upper().replace("-", "_")] = value
    return environ
