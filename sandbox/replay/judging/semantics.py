"""What an event *means*, apart from when and where it happened.

Replay compares and matches events by their meaning: the boundary (kind and name), the
attempt, the normalized request and the response or error. Sequence numbers, parents, wall
and monotonic times, durations, start times, token usage, provider metadata, response headers,
retry waits and fingerprints are left out: they change from one run to the next without the
agent deciding anything differently.

:func:`request_of` is the request view used to fingerprint a recorded event that carries no
fingerprint and to show a person the nearest recorded request; the capture agent fingerprints
the same view with :func:`sandbox.snapshot.normalize.request_fingerprint`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from sandbox.errors import SnapshotError
from sandbox.snapshot.events import EVENT_KINDS, ErrorInfo, Event
from sandbox.snapshot.normalize import normalize, normalize_url

BOUNDARY_KINDS: tuple[str, ...] = tuple(k for k in EVENT_KINDS if k not in {"state", "result"})
"""Kinds of event that are served by a policy on replay (state and result are outcomes)."""

_SEMANTIC_FIELDS: dict[str, tuple[str, ...]] = {
    "llm": ("model", "messages", "params", "tools", "response", "error"),
    "tool": ("args", "output", "output_blob", "error"),
    "retrieval": ("query", "documents", "error"),
    "memory": ("op", "key", "value"),
    "http": (
        "method",
        "url",
        "request_headers",
        "request_body",
        "request_blob",
        "status",
        "response_body",
        "response_blob",
        "error",
    ),
    "clock": ("source", "value"),
    "random": ("source", "seed", "value"),
    "retry": ("policy", "outcome", "error"),
    "timeout": ("committed",),
    "state": ("source", "target", "data"),
    "result": ("value", "error"),
}
"""Every field the semantic view reads, per kind. Equal fields give equal views, so a
comparison can test these raw values first and build the views only when they differ."""

RAW_GETTERS: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    kind: attrgetter("name", "attempt", *fields) for kind, fields in _SEMANTIC_FIELDS.items()
}


def _error(error: ErrorInfo | None) -> dict[str, str] | None:
    return None if error is None else {"type": error.type, "message": error.message}


def request_of(event: Event) -> Any:
    """The normalized request of a boundary event (what decides which response it gets)."""
    match event.kind:
        case "llm":
            raw: Any = {
                "model": event.model,
                "messages": event.messages,
                "params": event.params,
                "tools": event.tools,
            }
        case "tool":
            raw = event.args
        case "retrieval":
            raw = event.query
        case "memory":
            raw = {"op": event.op, "key": event.key}
            if event.op == "write":
                raw["value"] = event.value
        case "http":
            raw = {
                "method": event.method.upper(),
                "url": normalize_url(event.url),
                "headers": {k.lower(): v for k, v in event.request_headers.items()},
                "body": event.request_body,
            }
            if event.request_blob is not None:
                raw["body_sha256"] = event.request_blob.sha256
        case "clock":
            raw = {"source": event.source}
        case "random":
            raw = {"source": event.source, "seed": event.seed}
        case "retry":
            raw = {"policy": event.policy}
        case "timeout":
            raw = {}
        case "state":
            raw = {"source": event.source, "target": event.target}
        case "result":
            raw = {}
        case other:
            raise SnapshotError(f"not an event kind: {other!r}")
    return normalize(raw)


def response_of(event: Event) -> Any:
    """What came back: the response, output, value or error (never timing)."""
    match event.kind:
        case "llm":
            return {"response": event.response, "error": _error(event.error)}
        case "tool":
            blob = event.output_blob.sha256 if event.output_blob is not None else None
            out: dict[str, Any] = {"output": event.output, "error": _error(event.error)}
            if blob is not None:
                out["output_sha256"] = blob
            return out
        case "retrieval":
            return {
                "documents": [{"id": d.id, "sha256": d.sha256} for d in event.documents],
                "error": _error(event.error),
            }
        case "memory":
            return {"value": event.value} if event.op == "read" else {}
        case "http":
            out = {
                "status": event.status,
                "body": event.response_body,
                "error": _error(event.error),
            }
            if event.response_blob is not None:
                out["body_sha256"] = event.response_blob.sha256
            return out
        case "clock" | "random":
            return {"value": event.value}
        case "retry":
            return {"outcome": event.outcome, "error": _error(event.error)}
        case "timeout":
            return {"committed": event.committed}
        case "state":
            return {"data": event.data}
        case "result":
            return {"value": event.value, "error": _error(event.error)}
        case other:
            raise SnapshotError(f"not an event kind: {other!r}")


def semantic_view(event: Event) -> dict[str, Any]:
    """The event as compared on replay: kind, name, attempt, request and response."""
    return {
        "kind": event.kind,
        "name": event.name,
        "attempt": event.attempt,
        "request": request_of(event),
        "response": response_of(event),
    }
