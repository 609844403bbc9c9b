"""What the ASGI and WSGI middlewares (:mod:`sandbox.capture.asgi`, :mod:`sandbox.capture.wsgi`)
share: their settings, the labels each request's run holds, what its answer records, the
entrypoint that replays their runs when none is given, and the recorded request a replay
sends again."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sandbox.capture.inbound import NOT_SENT, body_bytes, origin
from sandbox.capture.markers import active
from sandbox.capture.recorder import Recorder
from sandbox.capture.whereis import AppFactory, app_entrypoint
from sandbox.errors import CaptureError
from sandbox.names import REQUEST_EVENT
from sandbox.seam import boundary
from sandbox.snapshot.events import StateTransition

METHOD, PATH, QUERY = "http.method", "http.path", "http.query"
"""The labels holding a captured request's line."""
FAILED_STATUS = "http.failed_status"
"""The label holding the status from which the middleware marked a request failed."""


class ServiceCapture:
    """A middleware capturing each request of ``app`` as a run: ``name`` names it (the
    class's :attr:`route_name` by default), an answer at or above ``failed_status`` fails
    it, the other settings are ``capture.run``'s."""

    route_name: ClassVar[Callable[..., str]]
    """A request's run name, from the request (an ASGI scope, a WSGI environ)."""

    def __init__(
        self,
        app: Any,
        *,
        name: Callable[[Any], str] | None = None,
        failed_status: int = 500,
        **settings: Any,
    ) -> None:
        self.app = app
        self.name: Callable[[Any], str] = name or type(self).route_name
        self.failed_status = failed_status
        self.settings = settings
        self._found = "entrypoint" in settings
        """Whether the entrypoint is settled (given, or looked for: :meth:`_settle`)."""
        self._factory = None if self._found else AppFactory.of_caller()
        """The call making the app as this middleware is made, for an app no module holds."""
        self._settling = threading.Lock()

    def labels(self, method: str, path: str, query: str) -> dict[str, str]:
        """A request's labels: the settings' own, its line and the failed status."""
        return {
            **self.settings.get("labels", {}),
            METHOD: method,
            PATH: path,
            QUERY: query,
            FAILED_STATUS: str(self.failed_status),
        }

    def _settle(self, app: object, via: str | None = None) -> None:
        """With no entrypoint given, the app (``app``, or what holds it as its ``via``
        attribute: a Flask object's ``wsgi_app``), where a module holds it: its replay sends
        the recorded request through it. Looked for once, and not in a replay's app; the
        first requests, served at once, wait for it (their runs replay through it too)."""
        with self._settling:
            if self._found or boundary.installed() is not None:
                return
            found = app_entrypoint(app, type(self).__name__, self._factory, via=via)
            if found is not None:
                self.settings["entrypoint"] = found
            self._found = True


def answered(recorder: Recorder, status: int, failed_status: int) -> None:
    """What a request's answer records, captured or replayed alike: ``{"status": N}`` as its
    result (unless the app set one), and, at or above ``failed_status``, the run marked
    failed (unless the app marked it: its own reason and predicate stand)."""
    recorder.offer_result({"status": status})
    if status >= failed_status and recorder.failure is None:
        recorder.mark_failed(f"HTTP {status} from {recorder.writer.manifest.name}")


@dataclass(frozen=True)
class Replayed:
    """The request of the run being replayed, to send again: its line, its headers and body
    with the secrets the user supplied put back, and the ``scheme://host`` it went to."""

    recorder: Recorder
    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes
    origin: str
    failed_status: int

    @property
    def url(self) -> str:
        return self.path + (f"?{self.query}" if self.query else "")

    def answered(self, status: int) -> None:
        """Record the answer as the middleware did (:func:`answered`)."""
        answered(self.recorder, status, self.failed_status)


def to_replay() -> Replayed:
    """The request of the run being replayed (its labels' line, its recorded request
    event), that event recorded again in the replayed run; one clear error outside a
    replay of a captured request."""
    recorder = active()
    labels: Mapping[str, str] = recorder.writer.manifest.labels if recorder is not None else {}
    if recorder is None or METHOD not in labels or PATH not in labels:
        raise CaptureError("no captured HTTP request is being replayed (no http.* labels)")
    inbound = recorder.recorded_state(REQUEST_EVENT)
    data = inbound.data if inbound is not None else {}
    body = body_bytes(data, recorder.unredacted)
    if inbound is not None:
        recorder.emit(StateTransition, None, name=inbound.name, target="request", data=data)
    recorded = data.get("headers")
    failed = labels.get(FAILED_STATUS, "500")
    return Replayed(
        recorder=recorder,
        method=labels[METHOD],
        path=labels[PATH],
        query=labels.get(QUERY, ""),
        headers=[
            (name, recorder.unredacted(str(value)))
            for name, value in (recorded if isinstance(recorded, dict) else {}).items()
            if name not in NOT_SENT
        ],
        body=body,
        origin=origin(data),
        failed_status=int(failed) if failed.isdigit() else 500,
    )
