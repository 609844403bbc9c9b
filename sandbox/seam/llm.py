"""Reading model calls out of HTTP exchanges: OpenAI chat completions and responses, and
Anthropic messages, plain or streamed (server-sent events).

Pure functions from JSON to JSON: the HTTP capture calls them to add an ``llm`` event next to
the ``http`` event of an exchange with an OpenAI- or Anthropic-shaped endpoint, and replay
routing matches a model call made over HTTP by the same reading (:meth:`LLMRequest.meaning`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

CHAT = "openai.chat"
RESPONSES = "openai.responses"
MESSAGES = "anthropic.messages"

_NOT_PARAMS = frozenset({"model", "messages", "tools", "input", "system", "functions"})


def endpoint_kind(method: str, path: str) -> str | None:
    """Which model API a request targets, from its method and URL path."""
    if method.upper() != "POST":
        return None
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/messages"):
        return MESSAGES
    return None


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


def parse_request(kind: str, body: Any) -> LLMRequest:
    if not isinstance(body, dict):
        body = {}
    provider = "anthropic" if kind == MESSAGES else "openai"
    messages: list[JsonValue] = []
    if kind == MESSAGES and body.get("system") is not None:
        messages.append({"role": "system", "content": body["system"]})
    if kind == RESPONSES:
        if body.get("instructions") is not None:
            messages.append({"role": "system", "content": body["instructions"]})
        given = body.get("input")
        if isinstance(given, str):
            messages.append({"role": "user", "content": given})
        elif isinstance(given, list):
            messages.extend(given)
    else:
        messages.extend(body.get("messages") or [])
    tools = list(body.get("tools") or body.get("functions") or [])
    params = {k: v for k, v in body.items() if k not in _NOT_PARAMS}
    return LLMRequest(provider, str(body.get("model", "")), messages, params, tools)


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


def parse_response(kind: str, body: Any, streamed: bool) -> LLMResponse:
    if streamed:
        events = parse_sse(body if isinstance(body, str) else "")
        if kind == CHAT:
            return _chat_stream(events)
        if kind == MESSAGES:
            return _anthropic_stream(events)
        return _responses_stream(events)
    if not isinstance(body, dict):
        return LLMResponse()
    if kind == CHAT:
        return _chat(body)
    if kind == MESSAGES:
        return _anthropic(body)
    return _responses(body)


def _meta(body: dict[str, Any], *keys: str) -> dict[str, JsonValue]:
    return {k: body[k] for k in keys if body.get(k) is not None}


def _chat(body: dict[str, Any]) -> LLMResponse:
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = [
        {
            "id": c.get("id"),
            "name": (c.get("function") or {}).get("name"),
            "arguments": (c.get("function") or {}).get("arguments"),
        }
        for c in message.get("tool_calls") or []
    ]
    return LLMResponse(
        {
            "text": message.get("content"),
            "tool_calls": calls,
            "stop_reason": choice.get("finish_reason"),
        },
        body.get("usage") or {},
        _meta(body, "id", "model", "created", "system_fingerprint", "service_tier"),
    )


def _chat_stream(events: list[tuple[str, Any]]) -> LLMResponse:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    stop = None
    usage: dict[str, JsonValue] = {}
    meta: dict[str, JsonValue] = {}
    for _, data in events:
        if not isinstance(data, dict):
            continue
        meta.update(_meta(data, "id", "model", "created", "system_fingerprint", "service_tier"))
        if data.get("usage"):
            usage = data["usage"]
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    tc.get("index", 0), {"id": None, "name": None, "arguments": ""}
                )
                fn = tc.get("function") or {}
                slot["id"] = tc.get("id") or slot["id"]
                slot["name"] = fn.get("name") or slot["name"]
                slot["arguments"] += fn.get("arguments") or ""
            stop = choice.get("finish_reason") or stop
    return LLMResponse(
        {
            "text": "".join(text),
            "tool_calls": [calls[i] for i in sorted(calls)],
            "stop_reason": stop,
        },
        usage,
        meta,
    )


def _anthropic(body: dict[str, Any]) -> LLMResponse:
    text = [b.get("text", "") for b in body.get("content") or [] if b.get("type") == "text"]
    calls = [
        {"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input")}
        for b in body.get("content") or []
        if b.get("type") == "tool_use"
    ]
    return LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": body.get("stop_reason")},
        body.get("usage") or {},
        _meta(body, "id", "model", "type", "stop_sequence"),
    )


def _anthropic_stream(events: list[tuple[str, Any]]) -> LLMResponse:
    blocks: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    meta: dict[str, JsonValue] = {}
    stop = None
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type", name)
        if kind == "message_start":
            message = data.get("message") or {}
            meta.update(_meta(message, "id", "model", "type"))
            usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            blocks[data.get("index", 0)] = dict(data.get("content_block") or {}, _json="")
        elif kind == "content_block_delta":
            block = blocks.setdefault(data.get("index", 0), {"type": "text", "_json": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                block["_json"] += delta.get("partial_json", "")
        elif kind == "message_delta":
            stop = (data.get("delta") or {}).get("stop_reason") or stop
            usage.update(data.get("usage") or {})
    text, calls = [], []
    for i in sorted(blocks):
        block = blocks[i]
        if block.get("type") == "text":
            text.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            try:
                args: Any = json.loads(block["_json"]) if block["_json"] else block.get("input")
            except ValueError:
                args = block["_json"]
            calls.append({"id": block.get("id"), "name": block.get("name"), "arguments": args})
    return LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": stop}, usage, meta
    )


def _responses(body: dict[str, Any]) -> LLMResponse:
    text: list[str] = []
    calls = []
    for item in body.get("output") or []:
        if item.get("type") == "message":
            text.extend(
                c.get("text", "")
                for c in item.get("content") or []
                if c.get("type") == "output_text"
            )
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "name": item.get("name"),
                    "arguments": item.get("arguments"),
                }
            )
    return LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": body.get("status")},
        body.get("usage") or {},
        _meta(body, "id", "model", "created_at", "service_tier"),
    )


def _responses_stream(events: list[tuple[str, Any]]) -> LLMResponse:
    deltas: list[str] = []
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type", name)
        if kind in {"response.completed", "response.incomplete", "response.failed"}:
            return _responses(data.get("response") or {})
        if kind == "response.output_text.delta":
            deltas.append(data.get("delta", ""))
    return LLMResponse({"text": "".join(deltas), "tool_calls": [], "stop_reason": None})
