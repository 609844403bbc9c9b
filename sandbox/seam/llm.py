"""Reading model calls out of HTTP exchanges, and writing answers back, one model API per
module: the :class:`LLMApi` protocol, its registry and what every API shares.

Each model API (OpenAI chat completions, OpenAI Responses, Anthropic messages, ...) is one
module of :mod:`sandbox.seam.apis` exposing an :class:`LLMApi` as ``API``; a plug-in adds one
under the entry-point group :data:`ENTRY_POINT_GROUP`. Generic code asks the registry
(:func:`recognise`, :func:`api`) and names no API: the HTTP capture adds an ``llm`` event next
to the ``http`` event of an exchange an API recognises, replay routing matches a model call
made over HTTP by the same reading (:meth:`LLMRequest.meaning`), a fork writes its override
in the API's shape (streamed as the API streams), and the OpenTelemetry import and export
map a call to and from the GenAI conventions through it.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import JsonValue

from sandbox.errors import ForkError

ENTRY_POINT_GROUP = "sandbox_replayer.llm_apis"
"""Entry points naming an :class:`LLMApi` object (``package.module:API``)."""

BUILTINS = (
    "sandbox.seam.apis.openai_chat",
    "sandbox.seam.apis.openai_responses",
    "sandbox.seam.apis.anthropic_messages",
    "sandbox.seam.apis.gemini",
)
"""Modules of the model APIs that come with the package, in the order they are asked."""

REQUEST_KEYS = frozenset(
    {"model", "messages", "tools", "input", "system", "instructions", "functions"}
)
"""Keys of a request body read as its model, messages or tools: the rest are parameters."""


@dataclass
class LLMRequest:
    provider: str
    model: str
    messages: list[JsonValue]
    params: dict[str, JsonValue]
    tools: list[JsonValue]

    def meaning(self) -> dict[str, JsonValue]:
        """The request as a model call is fingerprinted at capture and matched on replay:
        model, messages, parameters and tools (not the endpoint or its port)."""
        return {
            "model": self.model,
            "messages": self.messages,
            "params": self.params,
            "tools": self.tools,
        }


@dataclass
class LLMResponse:
    response: dict[str, Any] = field(default_factory=dict)
    """``{"text", "tool_calls": [{"id", "name", "arguments"}], "stop_reason"}``."""
    usage: dict[str, JsonValue] = field(default_factory=dict)
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Imported:
    """A model call read from a trace, to be rebuilt as an exchange of an API: the messages
    as OpenAI chat messages, the answer as ``{"text", "tool_calls", "stop_reason"}``."""

    model: str
    messages: list[JsonValue]
    params: dict[str, JsonValue]
    tools: list[JsonValue]
    answer: dict[str, Any]
    usage: dict[str, JsonValue]
    response_id: str
    created: int


@runtime_checkable
class LLMApi(Protocol):
    """One model API: how its requests are recognised and read, its answers read, streamed
    and overridden, and its calls mapped to and from OpenTelemetry."""

    name: str
    """Recorded as the call's ``provider_meta["api"]`` (``openai.chat``)."""
    provider: str
    """The call's provider, as the GenAI conventions name it (``openai``)."""
    client: tuple[str, str] | None
    """The SDK agents reach it with: its distribution and the module it installs."""
    usage_keys: tuple[str, str]
    """The keys of the input and output token counts in a recorded call's usage."""

    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        """Whether a request (method, full URL, headers; a recorded request's headers may be
        empty) is a call of this API. One that reads only the method and URL says so with
        :func:`url_only` (a subclass overriding it is taken to read the headers unless it
        says so again): :func:`recognise` then remembers its answers."""
        ...

    def parse_request(self, url: str, body: Any) -> LLMRequest: ...

    def parse_response(self, body: Any, streamed: bool) -> LLMResponse:
        """The answer of a response body (a stream's text when ``streamed``)."""
        ...

    def stream_text(self, body: dict[str, Any]) -> str:
        """``body`` (a whole response) as the stream this API sends it as: what a client
        reading the stream assembles into the same response."""
        ...

    def is_response_body(self, value: Any) -> bool:
        """Whether a fork's override is a whole response body of this API."""
        ...

    def answer_body(self, body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
        """``body`` (the recorded response, or its identity) answering with ``value``: an
        assistant message (its text, or ``{"content", "tool_calls"}``)."""
        ...

    def chat_messages(self, messages: list[Any]) -> list[Any]:
        """A recorded call's messages as OpenAI chat messages (what the GenAI mapping reads)."""
        ...

    def imported_url(self, model: str, origin: str | None) -> str:
        """The URL a call of ``model`` read from a trace is made to (``origin``: the
        ``scheme://host[:port]`` the trace names, if any)."""
        ...

    def imported_request(self, call: Imported) -> dict[str, JsonValue]: ...

    def imported_response(self, call: Imported) -> dict[str, JsonValue]: ...


_registry: list[LLMApi] | None = None


def _load() -> list[LLMApi]:
    found: list[LLMApi] = [importlib.import_module(m).API for m in BUILTINS]
    names = {a.name for a in found}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        loaded = point.load()
        if isinstance(loaded, LLMApi) and loaded.name not in names:
            found.append(loaded)
            names.add(loaded.name)
    return found


def apis() -> list[LLMApi]:
    """Every model API: the built-in ones, then the plug-ins' (loaded once)."""
    global _registry
    if _registry is None:
        _registry = _load()
    return _registry


def reload() -> list[LLMApi]:
    """Load the registry again (after a plug-in is installed)."""
    global _registry
    _registry = None
    return apis()


def api(name: object) -> LLMApi | None:
    """The API a call recorded as ``name`` was made with."""
    return next((a for a in apis() if a.name == name), None)


_F = TypeVar("_F", bound=Callable[..., bool])


def url_only(recognises: _F) -> _F:
    """Mark an API's :meth:`LLMApi.recognises` as reading only the method and the URL of a
    request, never its headers (as the built-in APIs' do)."""
    recognises.reads_headers = False  # type: ignore[attr-defined]
    return recognises


def recognise(method: str, url: str, headers: Mapping[str, str] | None = None) -> LLMApi | None:
    """The API a request is a call of, if any. While no registered API reads the headers,
    the answer for a method and URL is remembered (the last thousand: an agent calls the
    same few URLs again and again)."""
    registry = tuple(apis())
    try:
        if _header_blind(registry):
            return _by_url(registry, method, url)
    except TypeError:  # a plug-in API that cannot be hashed: asked every time
        pass
    return next((a for a in registry if a.recognises(method, url, headers or {})), None)


@functools.lru_cache(maxsize=8)
def _header_blind(registry: tuple[LLMApi, ...]) -> bool:
    """Whether no API of ``registry`` reads a request's headers to recognise it (each one's
    ``recognises`` is marked :func:`url_only`)."""
    return not any(getattr(a.recognises, "reads_headers", True) for a in registry)


@functools.lru_cache(maxsize=1024)
def _by_url(registry: tuple[LLMApi, ...], method: str, url: str) -> LLMApi | None:
    return next((a for a in registry if a.recognises(method, url, {})), None)


def for_provider(provider: str) -> LLMApi | None:
    """The API a model call of ``provider`` read from a trace is rebuilt with: the first
    registered API of that provider."""
    return next((a for a in apis() if a.provider == provider), None)


def client_packages() -> list[tuple[str, str]]:
    """The SDKs of the registered APIs, each once: ``(distribution, module)``."""
    out: list[tuple[str, str]] = []
    for a in apis():
        if a.client is not None and a.client not in out:
            out.append(a.client)
    return out


def chat_messages(name: object, messages: list[Any]) -> list[Any]:
    """A call's messages as OpenAI chat messages, read by the API it was recorded with (those
    of a call of no known API are kept as they are)."""
    reader = api(name)
    return reader.chat_messages(messages) if reader is not None else messages


# --- what the APIs share ---------------------------------------------------------------------


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """Server-sent events as ``(event name, data)``; data is JSON when it parses."""
    events: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data_lines = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
        if not data_lines:
            continue
        raw = "\n".join(data_lines)
        try:
            events.append((name, json.loads(raw)))
        except ValueError:
            events.append((name, raw))
    return events


def meta(body: dict[str, Any], *keys: str) -> dict[str, JsonValue]:
    return {k: body[k] for k in keys if body.get(k) is not None}


def sse(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(
        (f"event: {name}\n" if name != "message" else "") + f"data: {json.dumps(data)}\n\n"
        for name, data in events
    )


# --- a fork's override: an assistant message ----------------------------------------------


def assistant_message(value: JsonValue) -> tuple[dict[str, Any], list[Any]]:
    """An assistant message override as a message and its tool calls (a list)."""
    message: dict[str, Any] = (
        {"content": value} if not isinstance(value, dict) else {"content": None, **value}
    )
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ForkError("tool_calls in a model override is a list")
    return message, calls


def short_call(call: Any, index: int) -> tuple[str, str, str]:
    """A tool call in the short form: its id, name and arguments (as a JSON string)."""
    if not isinstance(call, dict):
        raise ForkError('a tool call in a model override is {"name": ..., "arguments": {...}}')
    arguments = call.get("arguments", {})
    return (
        str(call.get("id", f"call_override_{index}")),
        str(call.get("name", "")),
        arguments if isinstance(arguments, str) else json.dumps(arguments),
    )
