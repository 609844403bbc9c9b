"""Model messages between the wire format a run records and the GenAI semantic conventions.

A run records a model call's messages as the provider's API took them (OpenAI chat
completions: ``{"role", "content", "tool_calls", "tool_call_id"}``; a Responses API call's
input items are read as such messages first, by :func:`sandbox.seam.llm.chat_messages`) and
its answer as
``{"text", "tool_calls": [{"id", "name", "arguments"}], "stop_reason"}``. The GenAI
conventions carry messages as JSON in ``gen_ai.input.messages`` and
``gen_ai.output.messages``: ``{"role", "parts": [...]}`` with parts of type ``text``,
``tool_call`` (``id``, ``name``, ``arguments``) and ``tool_call_response`` (``id``,
``response``), and a ``finish_reason`` on an output message.

Both directions are pure functions. A tool call's ``arguments`` string is kept as recorded
(JSON text is valid JSON), so a run exported and imported again sends the model the very
request it sent before; ``arguments`` given as an object (what other instrumentations write)
come back as ``json.dumps`` of it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

Message = dict[str, Any]


def _text_parts(content: Any) -> list[Message]:
    """Parts of a message's ``content``: a string, or a list of typed blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        parts: list[Message] = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append({"type": "text", "content": block["text"]})
            elif isinstance(block, str):
                parts.append({"type": "text", "content": block})
        return parts
    return [{"type": "text", "content": json.dumps(content)}]


def to_genai(messages: list[Any]) -> list[Message]:
    """Wire-format messages (OpenAI chat) as GenAI input messages."""
    out: list[Message] = []
    for raw in messages:
        if not isinstance(raw, dict):
            continue
        role = str(raw.get("role", "user"))
        if role == "tool":
            parts: list[Message] = [
                {
                    "type": "tool_call_response",
                    "id": raw.get("tool_call_id"),
                    "response": raw.get("content"),
                }
            ]
        else:
            parts = _text_parts(raw.get("content"))
            for call in raw.get("tool_calls") or []:
                if isinstance(call, dict):
                    fn = call.get("function") or {}
                    parts.append(
                        {
                            "type": "tool_call",
                            "id": call.get("id"),
                            "name": fn.get("name"),
                            "arguments": fn.get("arguments"),
                        }
                    )
        out.append({"role": role, "parts": parts})
    return out


def wire_tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """One tool call of an assistant message, in the OpenAI chat wire format."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def answer_message(response: Any) -> dict[str, Any] | None:
    """A recorded answer as the wire-format assistant message the agent received."""
    if not isinstance(response, dict):
        return None
    message: dict[str, Any] = {"role": "assistant", "content": response.get("text")}
    calls = [c for c in response.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        message["tool_calls"] = [
            wire_tool_call(c.get("id"), c.get("name"), c.get("arguments")) for c in calls
        ]
    return message


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _joined_text(parts: list[Message]) -> str | None:
    texts = [str(p.get("content", "")) for p in parts if p.get("type") == "text"]
    return "".join(texts) if texts else None


def from_genai(messages: list[Any]) -> list[JsonValue]:
    """GenAI input messages as OpenAI chat wire messages: text parts become ``content``, tool
    call parts ``tool_calls`` (``content`` then ``None`` when there is no text), a tool call
    response a ``tool`` message."""
    out: list[JsonValue] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "user"))
        parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
        responses = [p for p in parts if p.get("type") == "tool_call_response"]
        if role == "tool" or responses:
            for part in responses:
                response = part.get("response")
                content = response if isinstance(response, str) else json.dumps(response)
                out.append({"role": "tool", "tool_call_id": part.get("id"), "content": content})
            continue
        calls = [p for p in parts if p.get("type") == "tool_call"]
        wire: dict[str, JsonValue] = {"role": role, "content": _joined_text(parts)}
        if calls:
            wire["tool_calls"] = [
                wire_tool_call(c.get("id"), c.get("name"), _arguments(c.get("arguments")))
                for c in calls
            ]
        out.append(wire)
    return out


def response_to_genai(response: Any) -> list[Message]:
    """A recorded answer (``text``, ``tool_calls``, ``stop_reason``) as GenAI output messages."""
    if not isinstance(response, dict):
        return []
    parts = _text_parts(response.get("text") or None)
    for call in response.get("tool_calls") or []:
        if isinstance(call, dict):
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("arguments"),
                }
            )
    return [{"role": "assistant", "parts": parts, "finish_reason": response.get("stop_reason")}]


def response_from_genai(messages: list[Any]) -> dict[str, JsonValue]:
    """GenAI output messages as a recorded answer (the first output message)."""
    first = next((m for m in messages if isinstance(m, dict)), {})
    parts = [p for p in first.get("parts") or [] if isinstance(p, dict)]
    return {
        "text": _joined_text(parts),
        "tool_calls": [
            {"id": p.get("id"), "name": p.get("name"), "arguments": _arguments(p.get("arguments"))}
            for p in parts
            if p.get("type") == "tool_call"
        ],
        "stop_reason": first.get("finish_reason"),
    }
