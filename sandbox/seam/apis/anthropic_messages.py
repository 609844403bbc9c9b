"""Anthropic messages (``POST .../messages``): a ``system`` prompt and ``messages`` in,
``content`` blocks (``text``, ``tool_use``) out, plain or streamed as typed server-sent
events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from sandbox.errors import ForkError
from sandbox.seam import llm
from sandbox.seam.apis import openai_chat

NAME = "anthropic.messages"


class Messages:
    name = NAME
    provider = "anthropic"
    client: tuple[str, str] | None = ("anthropic", "anthropic")
    usage_keys = ("input_tokens", "output_tokens")

    @llm.url_only
    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        return method.upper() == "POST" and urlsplit(url).path.rstrip("/").endswith("/messages")

    def parse_request(self, url: str, body: Any) -> llm.LLMRequest:
        parsed = openai_chat.request(body, self.provider)
        if isinstance(body, dict) and body.get("system") is not None:
            parsed.messages.insert(0, {"role": "system", "content": body["system"]})
        return parsed

    def parse_response(self, body: Any, streamed: bool) -> llm.LLMResponse:
        if streamed:
            return _anthropic_stream(llm.parse_sse(body if isinstance(body, str) else ""))
        return _anthropic(body) if isinstance(body, dict) else llm.LLMResponse()

    def stream_text(self, body: dict[str, Any]) -> str:
        return llm.sse([(e["type"], e) for e in _anthropic_events(body)])

    def is_response_body(self, value: Any) -> bool:
        return isinstance(value, dict) and value.get("type") == "message"

    def answer_body(self, body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
        content = value.get("content") if isinstance(value, dict) else value
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise ForkError('a messages-API override is a string or {"content": [blocks]}')
        uses_tool = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)
        body.update(
            type="message",
            role="assistant",
            content=blocks,
            stop_reason="tool_use" if uses_tool else "end_turn",
        )
        return body

    def chat_messages(self, messages: list[Any]) -> list[Any]:
        return messages

    def imported_url(self, model: str, origin: str | None) -> str:
        return f"{origin or 'https://api.anthropic.com'}/v1/messages"

    def imported_request(self, call: llm.Imported) -> dict[str, JsonValue]:
        return openai_chat.imported_request(call)

    def imported_response(self, call: llm.Imported) -> dict[str, JsonValue]:
        text = call.answer.get("text")
        calls = [c for c in call.answer.get("tool_calls") or [] if isinstance(c, dict)]
        content: list[JsonValue] = [{"type": "text", "text": text}] if text else []
        content.extend(
            {
                "type": "tool_use",
                "id": c.get("id"),
                "name": c.get("name"),
                "input": _json_object(c.get("arguments")),
            }
            for c in calls
        )
        return {
            "id": call.response_id,
            "type": "message",
            "role": "assistant",
            "model": call.model,
            "content": content,
            "stop_reason": call.answer.get("stop_reason") or "end_turn",
            "usage": call.usage or {"input_tokens": 0, "output_tokens": 0},
        }


API = Messages()


def _json_object(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return {} if value is None else value


def _anthropic(body: dict[str, Any]) -> llm.LLMResponse:
    text = [b.get("text", "") for b in body.get("content") or [] if b.get("type") == "text"]
    calls = [
        {"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input")}
        for b in body.get("content") or []
        if b.get("type") == "tool_use"
    ]
    return llm.LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": body.get("stop_reason")},
        body.get("usage") or {},
        llm.meta(body, "id", "model", "type", "stop_sequence"),
    )


def _anthropic_stream(events: list[tuple[str, Any]]) -> llm.LLMResponse:
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
            meta.update(llm.meta(message, "id", "model", "type"))
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
    return llm.LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": stop}, usage, meta
    )


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
