"""Reading model calls out of HTTP exchanges: OpenAI chat completions and responses, and
Anthropic messages, plain or streamed (server-sent events); and writing a whole response
body back as the stream of its API (:func:`stream_text`).

Pure functions from JSON to JSON: the HTTP capture calls them to add an ``llm`` event next to
the ``http`` event of an exchange with an OpenAI- or Anthropic-shaped endpoint, and replay
routing matches a model call made over HTTP by the same reading (:meth:`LLMRequest.meaning`).
A fork that overrides a streamed answer serves the override as its API's stream, which the
same readers read back as the body it came from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

CHAT = "openai.chat"
RESPONSES = "openai.responses"
MESSAGES = "anthropic.messages"

REQUEST_KEYS = frozenset(
    {"model", "messages", "tools", "input", "system", "instructions", "functions"}
)
"""Keys of a request body read as its model, messages or tools: the rest are parameters."""


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
    params = {k: v for k, v in body.items() if k not in REQUEST_KEYS}
    return LLMRequest(provider, str(body.get("model", "")), messages, params, tools)


def chat_messages(messages: list[Any]) -> list[Any]:
    """A model call's messages as OpenAI chat messages: a Responses API input item is turned
    into one (a ``function_call`` item, with the ones right after it, into an assistant
    message with tool calls; a ``function_call_output`` item into a tool message; a
    ``message`` item's content parts into its text); anything else is kept as it is."""
    out: list[Any] = []
    calls: list[Any] | None = None  # the tool calls of the assistant message being grouped
    for item in messages:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if calls is None:
                calls = []
                out.append({"role": "assistant", "content": None, "tool_calls": calls})
            calls.append(call)
            continue
        calls = None
        if kind == "function_call_output":
            out.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
        elif kind == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
            out.append({"role": item.get("role"), "content": content})
        else:
            out.append(item)
    return out


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
    """The response a terminal event carries; for a stream cut before one, what came: the
    text deltas, the tool calls of the finished output items, the started response's id."""
    started: dict[str, Any] = {}
    done: dict[int, Any] = {}
    deltas: list[str] = []
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type", name)
        if kind in {"response.completed", "response.incomplete", "response.failed"}:
            return _responses(data.get("response") or {})
        if kind == "response.created" and isinstance(data.get("response"), dict):
            started = data["response"]
        elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            done[data.get("output_index", len(done))] = data["item"]
        elif kind == "response.output_text.delta":
            deltas.append(data.get("delta", ""))
    calls = [done[i] for i in sorted(done) if done[i].get("type") == "function_call"]
    answer = _responses({**started, "output": calls, "status": None})
    answer.response["text"] = "".join(deltas)
    return answer


# --- writing: Responses API output items, and a whole response body as its API's stream -----


def message_item(item_id: str, parts: list[Any]) -> dict[str, Any]:
    """A Responses API ``message`` output item of the assistant with content ``parts``."""
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": parts,
    }


def function_call_item(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A Responses API ``function_call`` output item (``arguments``: a JSON string)."""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def stream_text(kind: str, body: dict[str, Any]) -> str:
    """``body`` (a whole response of API ``kind``) as the server-sent events that API streams
    it as: what a client reading the stream assembles into the same response."""
    if kind == CHAT:
        events = [("message", e) for e in _chat_chunks(body)]
        return _sse(events) + "data: [DONE]\n\n"
    if kind == MESSAGES:
        return _sse([(e["type"], e) for e in _anthropic_events(body)])
    return _sse([(e["type"], e) for e in _responses_events(body)])


def _sse(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(
        (f"event: {name}\n" if name != "message" else "") + f"data: {json.dumps(data)}\n\n"
        for name, data in events
    )


def _chat_chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    head: dict[str, Any] = {
        k: body[k] for k in ("id", "created", "model", "system_fingerprint") if k in body
    }
    head["object"] = "chat.completion.chunk"
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    last: dict[str, Any] = {
        **head,
        "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}],
    }
    if body.get("usage"):
        last["usage"] = body["usage"]
    return [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}, last]


def _anthropic_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    usage = body.get("usage") or {}
    message = {**body, "content": [], "stop_reason": None, "usage": usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for index, block in enumerate(body.get("content") or []):
        at = {"index": index}
        if block.get("type") == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input"))}
        else:
            start = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        events += [
            {"type": "content_block_start", **at, "content_block": start},
            {"type": "content_block_delta", **at, "delta": delta},
            {"type": "content_block_stop", **at},
        ]
    stop = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    events += [
        {"type": "message_delta", "delta": stop, "usage": usage},
        {"type": "message_stop"},
    ]
    return events


def _responses_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}
    ]
    for index, item in enumerate(body.get("output") or []):
        at = {"item_id": item.get("id"), "output_index": index}
        started = {**item, "status": "in_progress"}
        steps: list[dict[str, Any]] = []
        if item.get("type") == "message":
            started["content"] = []
            for n, part in enumerate(item.get("content") or []):
                text = part.get("text", "")
                steps += [
                    {
                        "type": "response.content_part.added",
                        **at,
                        "content_index": n,
                        "part": {**part, "text": ""},
                    },
                    {"type": "response.output_text.delta", **at, "content_index": n, "delta": text},
                    {"type": "response.output_text.done", **at, "content_index": n, "text": text},
                    {"type": "response.content_part.done", **at, "content_index": n, "part": part},
                ]
        elif item.get("type") == "function_call":
            started["arguments"] = ""
            arguments = item.get("arguments", "")
            steps += [
                {"type": "response.function_call_arguments.delta", **at, "delta": arguments},
                {"type": "response.function_call_arguments.done", **at, "arguments": arguments},
            ]
        events += [
            {"type": "response.output_item.added", "output_index": index, "item": started},
            *steps,
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
    events.append({"type": "response.completed", "response": body})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]
