"""Google's Gemini API (``POST .../models/MODEL:generateContent``, and
``:streamGenerateContent?alt=sse`` streamed as server-sent events of whole responses), as
the ``google-genai`` SDK speaks it: ``contents`` of ``parts`` (``text``, ``functionCall``,
``functionResponse``) in, ``candidates`` out.

The model is named by the URL, not the body. A call's messages are recorded as the API took
them: its ``systemInstruction`` (as a ``system`` content) and its ``contents``. Its usage is
recorded as input, output and total tokens (the ``usageMetadata`` counts).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from sandbox.seam import llm

NAME = "gemini.generate_content"
ENDPOINT = re.compile(r"/models/(?P<model>[^/:]+):(?:generateContent|streamGenerateContent)$")
DEFAULT_ORIGIN = "https://generativelanguage.googleapis.com"
_REQUEST_KEYS = frozenset({"contents", "systemInstruction", "system_instruction", "tools"})


class GenerateContent:
    name = NAME
    provider = "gcp.gemini"
    client: tuple[str, str] | None = ("google-genai", "google.genai")
    usage_keys = ("input_tokens", "output_tokens", "total_tokens")

    @llm.url_only
    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        return method.upper() == "POST" and ENDPOINT.search(urlsplit(url).path) is not None

    def parse_request(self, url: str, body: Any) -> llm.LLMRequest:
        if not isinstance(body, dict):
            body = {}
        found = ENDPOINT.search(urlsplit(url).path)
        model = found["model"] if found else str(body.get("model", ""))
        messages: list[JsonValue] = []
        system = body.get("systemInstruction", body.get("system_instruction"))
        if isinstance(system, dict):
            messages.append({**system, "role": "system"})
        messages.extend(body.get("contents") or [])
        tools = list(body.get("tools") or [])
        params = {k: v for k, v in body.items() if k not in _REQUEST_KEYS and k != "model"}
        return llm.LLMRequest(self.provider, model, messages, params, tools)

    def parse_response(self, body: Any, streamed: bool) -> llm.LLMResponse:
        if not streamed:
            return _read([body] if isinstance(body, dict) else [])
        events = llm.parse_sse(body if isinstance(body, str) else "")
        return _read([data for _, data in events if isinstance(data, dict)])

    def stream_text(self, body: dict[str, Any]) -> str:
        return llm.sse([("message", body)])

    def is_response_body(self, value: Any) -> bool:
        return isinstance(value, dict) and "candidates" in value

    def answer_body(self, body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
        """One candidate whose parts are the message: a ``text`` part for its text (or the
        parts it gives), a ``functionCall`` part for each tool call."""
        message, calls = llm.assistant_message(value)
        content = message.get("content")
        given = content if isinstance(content, list) else [content] if content else []
        parts: list[Any] = [p if isinstance(p, dict) else {"text": str(p)} for p in given]
        for i, call in enumerate(calls):
            if isinstance(call, dict) and "functionCall" in call:
                parts.append(call)
                continue
            call_id, name, arguments = llm.short_call(call, i)
            function: dict[str, Any] = {"name": name, "args": json.loads(arguments or "{}")}
            if isinstance(call, dict) and call.get("id"):
                function["id"] = call_id
            parts.append({"functionCall": function})
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
        body["candidates"] = [{**candidate, "index": 0}]
        return body

    def chat_messages(self, messages: list[Any]) -> list[Any]:
        out: list[Any] = []
        for content in messages:
            if not isinstance(content, dict):
                out.append(content)
                continue
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            text = "".join(str(p["text"]) for p in parts if "text" in p and not p.get("thought"))
            calls = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
            answers = [
                p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)
            ]
            role = {"model": "assistant"}.get(str(content.get("role")), content.get("role"))
            for answer in answers:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": answer.get("id") or answer.get("name"),
                        "content": json.dumps(answer.get("response")),
                    }
                )
            if calls:
                out.append(
                    {
                        "role": "assistant",
                        "content": text or None,
                        "tool_calls": [_chat_call(c) for c in calls],
                    }
                )
            elif text or not answers:
                out.append({"role": role or "user", "content": text})
        return out

    def imported_url(self, model: str, origin: str | None) -> str:
        return f"{origin or DEFAULT_ORIGIN}/v1beta/models/{model}:generateContent"

    def imported_request(self, call: llm.Imported) -> dict[str, JsonValue]:
        body: dict[str, JsonValue] = {"contents": [], **call.params}
        contents: list[JsonValue] = []
        names: dict[str, str] = {}
        for given in call.messages:
            if not isinstance(given, dict):
                continue
            message: dict[str, Any] = given
            role, content = message.get("role"), message.get("content")
            if role == "system":
                body["systemInstruction"] = {"parts": [{"text": _text(content)}]}
            elif role == "tool":
                call_id = str(message.get("tool_call_id"))
                answer = {"name": names.get(call_id, call_id), "response": _object(content)}
                contents.append({"role": "user", "parts": [{"functionResponse": answer}]})
            elif role == "assistant":
                parts: list[JsonValue] = [{"text": _text(content)}] if content else []
                for c in message.get("tool_calls") or []:
                    function = c.get("function") or {}
                    names[str(c.get("id"))] = str(function.get("name"))
                    args = _object(function.get("arguments"))
                    parts.append({"functionCall": {"name": function.get("name"), "args": args}})
                contents.append({"role": "model", "parts": parts})
            else:
                contents.append({"role": "user", "parts": [{"text": _text(content)}]})
        body["contents"] = contents
        if call.tools:
            body["tools"] = call.tools
        return body

    def imported_response(self, call: llm.Imported) -> dict[str, JsonValue]:
        answer = {"content": call.answer.get("text"), "tool_calls": call.answer.get("tool_calls")}
        body = self.answer_body(
            {"responseId": call.response_id, "modelVersion": call.model}, answer
        )
        usage = {
            key: call.usage[name]
            for key, name in (
                ("promptTokenCount", "input_tokens"),
                ("candidatesTokenCount", "output_tokens"),
                ("totalTokenCount", "total_tokens"),
            )
            if name in call.usage
        }
        if usage:
            body["usageMetadata"] = usage
        return body


API = GenerateContent()


def _chat_call(call: dict[str, Any]) -> dict[str, Any]:
    name = call.get("name")
    arguments = json.dumps(call.get("args") or {})
    return {
        "id": call.get("id") or name,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _object(value: Any) -> Any:
    """A function call's arguments or a function's response as the JSON object Gemini takes."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    return value if isinstance(value, dict) else {"result": value}


def _read(chunks: list[dict[str, Any]]) -> llm.LLMResponse:
    """The answer of a response, or of a stream's responses in order (text parts joined,
    function calls collected, the last finish reason and usage)."""
    text: list[str] = []
    calls: list[Any] = []
    stop = None
    usage: dict[str, JsonValue] = {}
    meta: dict[str, JsonValue] = {}
    for chunk in chunks:
        meta.update(llm.meta(chunk, "responseId", "modelVersion"))
        counts = chunk.get("usageMetadata") or {}
        for key, name in (
            ("promptTokenCount", "input_tokens"),
            ("candidatesTokenCount", "output_tokens"),
            ("totalTokenCount", "total_tokens"),
        ):
            if isinstance(counts.get(key), int):
                usage[name] = counts[key]
        for candidate in (chunk.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if isinstance(part.get("text"), str) and not part.get("thought"):
                    text.append(part["text"])
                function = part.get("functionCall")
                if isinstance(function, dict):
                    calls.append(
                        {
                            "id": function.get("id"),
                            "name": function.get("name"),
                            "arguments": function.get("args"),
                        }
                    )
            stop = candidate.get("finishReason") or stop
    return llm.LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": stop}, usage, meta
    )
