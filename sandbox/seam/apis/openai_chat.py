"""OpenAI chat completions (``POST .../chat/completions``), plain or streamed as server-sent
events ending in ``data: [DONE]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from sandbox.seam import llm

NAME = "openai.chat"


class ChatCompletions:
    name = NAME
    provider = "openai"
    client: tuple[str, str] | None = ("openai", "openai")
    usage_keys = ("prompt_tokens", "completion_tokens")

    @llm.url_only
    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        return method.upper() == "POST" and _path(url).endswith("/chat/completions")

    def parse_request(self, url: str, body: Any) -> llm.LLMRequest:
        return request(body, self.provider)

    def parse_response(self, body: Any, streamed: bool) -> llm.LLMResponse:
        if streamed:
            return _chat_stream(llm.parse_sse(body if isinstance(body, str) else ""))
        return _chat(body) if isinstance(body, dict) else llm.LLMResponse()

    def stream_text(self, body: dict[str, Any]) -> str:
        return llm.sse([("message", e) for e in _chat_chunks(body)]) + "data: [DONE]\n\n"

    def is_response_body(self, value: Any) -> bool:
        return isinstance(value, dict) and "choices" in value

    def answer_body(self, body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
        message, calls = llm.assistant_message(value)
        message["role"] = "assistant"
        message["tool_calls"] = [_wire_call(c, i) for i, c in enumerate(calls)] or None
        if message["tool_calls"] is None:
            del message["tool_calls"]
        finish = "tool_calls" if calls else "stop"
        body["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
        body.setdefault("object", "chat.completion")
        return body

    def chat_messages(self, messages: list[Any]) -> list[Any]:
        return messages

    def imported_url(self, model: str, origin: str | None) -> str:
        return f"{origin or 'https://api.openai.com'}/v1/chat/completions"

    def imported_request(self, call: llm.Imported) -> dict[str, JsonValue]:
        return imported_request(call)

    def imported_response(self, call: llm.Imported) -> dict[str, JsonValue]:
        message: dict[str, Any] = {"role": "assistant", "content": call.answer.get("text")}
        calls = [c for c in call.answer.get("tool_calls") or [] if isinstance(c, dict)]
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {"name": c.get("name"), "arguments": c.get("arguments")},
                }
                for c in calls
            ]
        body: dict[str, JsonValue] = {
            "id": call.response_id,
            "object": "chat.completion",
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": call.answer.get("stop_reason") or "stop",
                }
            ],
        }
        if call.usage:
            body["usage"] = call.usage
        return body


API = ChatCompletions()


def _path(url: str) -> str:
    return urlsplit(url).path.rstrip("/")


def request(body: Any, provider: str) -> llm.LLMRequest:
    """A chat-shaped request body (``model``, ``messages``, ``tools``; the rest parameters)."""
    if not isinstance(body, dict):
        body = {}
    messages: list[JsonValue] = list(body.get("messages") or [])
    tools = list(body.get("tools") or body.get("functions") or [])
    params = {k: v for k, v in body.items() if k not in llm.REQUEST_KEYS}
    return llm.LLMRequest(provider, str(body.get("model", "")), messages, params, tools)


def imported_request(call: llm.Imported) -> dict[str, JsonValue]:
    """A chat-shaped request body of a call read from a trace."""
    body: dict[str, JsonValue] = {"model": call.model, "messages": call.messages, **call.params}
    if call.tools:
        body["tools"] = call.tools
    return body


def _wire_call(call: Any, index: int) -> dict[str, Any]:
    if isinstance(call, dict) and "function" in call:
        return call
    call_id, name, arguments = llm.short_call(call, index)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _chat(body: dict[str, Any]) -> llm.LLMResponse:
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
    return llm.LLMResponse(
        {
            "text": message.get("content"),
            "tool_calls": calls,
            "stop_reason": choice.get("finish_reason"),
        },
        body.get("usage") or {},
        llm.meta(body, "id", "model", "created", "system_fingerprint", "service_tier"),
    )


def _chat_stream(events: list[tuple[str, Any]]) -> llm.LLMResponse:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    stop = None
    usage: dict[str, JsonValue] = {}
    meta: dict[str, JsonValue] = {}
    for _, data in events:
        if not isinstance(data, dict):
            continue
        meta.update(llm.meta(data, "id", "model", "created", "system_fingerprint", "service_tier"))
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
    return llm.LLMResponse(
        {
            "text": "".join(text),
            "tool_calls": [calls[i] for i in sorted(calls)],
            "stop_reason": stop,
        },
        usage,
        meta,
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
