"""Request routing for the replay: what a crossing is matched as, and the recording as the
replay matches it.

A model call made over HTTP is matched on its meaning (model, messages, parameters, tools),
not on the exchange, so a local model server on another port still matches; an HTTP call to
a loopback address ignores the port for the same reason (:func:`canonical_url`). Recorded
events get the same canonical names and fingerprints (:func:`prepare_recording`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import JsonValue

from sandbox.replay.judging.semantics import request_of
from sandbox.seam import llm
from sandbox.seam.boundary import Call
from sandbox.snapshot.events import Event, HTTPExchange, LLMCall
from sandbox.snapshot.hashing import read_json
from sandbox.snapshot.normalize import normalize_url, request_fingerprint

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class Route:
    """How a crossing is looked up: the kind and name it is matched as, and its request."""

    kind: str
    name: str
    request: JsonValue
    order_name: str


def canonical_url(url: str) -> str:
    """``url`` normalized, with the port of a loopback host dropped (local servers move)."""
    url = normalize_url(url)
    parts = urlsplit(url)
    if parts.hostname in LOOPBACK and parts.port is not None:
        return urlunsplit(parts._replace(netloc="127.0.0.1"))
    if parts.hostname in LOOPBACK:
        return urlunsplit(parts._replace(netloc="127.0.0.1"))
    return url


def canonical_http_name(name: str) -> str:
    method, sep, url = name.partition(" ")
    return f"{method} {canonical_url(url)}" if sep else name


def canonical_name(kind: str, name: str) -> str:
    return canonical_http_name(name) if kind == "http" else name


def legacy_llm_fingerprint(event: Event) -> bool:
    """A model call fingerprinted under its API name (``openai.chat``) instead of the model
    name it is matched under: what captures made before they agreed with replay."""
    api = event.provider_meta.get("api") if isinstance(event, LLMCall) else None
    return (
        isinstance(api, str)
        and api != event.name
        and event.fingerprint == request_fingerprint("llm", api, request_of(event))
    )


def prepare_recording(events: Sequence[Event], blobs: Callable[[str], bytes]) -> list[Event]:
    """The recorded events as the replay matches them: HTTP calls with loopback ports
    dropped and their bodies read as the crossing reads a request's (JSON when it is JSON,
    whatever type it was sent as); model calls keep the fingerprint the capture took under
    the model's name (an older snapshot's, taken under the API name or with a key now read
    as the request's messages among its parameters (a Responses call's instructions), is
    dropped, and that key with it: the matcher then fingerprints the recorded request)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, LLMCall) and (
            legacy_llm_fingerprint(event) or llm.REQUEST_KEYS & event.params.keys()
        ):
            params = {k: v for k, v in event.params.items() if k not in llm.REQUEST_KEYS}
            out.append(event.model_copy(update={"params": params, "fingerprint": None}))
        elif isinstance(event, HTTPExchange):
            body: Any = event.request_body
            raw = blobs(event.request_blob.sha256) if event.request_blob is not None else None
            if raw is None and isinstance(body, str):
                raw = body.encode("utf-8")  # recorded as text (not sent as JSON): read as sent
            if raw is not None:
                try:
                    body = read_json(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
            name = canonical_http_name(event.name)
            request = {"method": event.method, "url": canonical_url(event.url), "body": body}
            out.append(
                event.model_copy(
                    update={"name": name, "fingerprint": request_fingerprint("http", name, request)}
                )
            )
        else:
            out.append(event)
    return out


def route(call: Call) -> Route:
    """What the crossing is matched as: a model call by its meaning, HTTP by canonical URL."""
    if call.kind != "http" or not isinstance(call.request, dict):
        return Route(call.kind, call.name, call.request, call.name)
    order_name = canonical_http_name(call.name)
    method = str(call.request.get("method", ""))
    url = str(call.request.get("url", ""))
    api = llm.recognise(method, url)
    if api is not None:
        parsed = api.parse_request(url, call.request.get("body"))
        return Route("llm", parsed.model, parsed.meaning(), order_name)
    request: JsonValue = {**call.request, "url": canonical_url(url)}
    return Route("http", order_name, request, order_name)
