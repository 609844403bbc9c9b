"""The OpenAI Responses API (``POST .../responses``): ``instructions`` and ``input`` items in,
``output`` items out, plain or streamed as typed server-sent events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from sandbox.seam import llm

NAME = "openai.responses"


class Responses:
    name = NAME
    provider = "openai"
    client: tuple[str, str] | None = ("openai", "openai")
    usage_keys = ("input_tokens", "output_tokens")

    @llm.url_only
    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        return method.upper() == "POST" and urlsplit(url).path.rstrip("/").endswith("/responses")

    def parse_request(self, url: str, body: Any) -> llm.LLMRequest:
        if not isinstance(body, dict):
            body = {}
        messages: list[JsonValue] = []
        if body.get("instructions") is not None:
            messages.append({"role": "system", "content": body["instructions"]})
        given = body.get("input")
        if isinstance(given, str):
            messages.append({"role": "user", "content": given})
        elif isinstance(given, list):
            messages.extend(given)
        tools = list(body.get("tools") or body.get("functions") or [])
        params = {k: v for k, v in body.items() if k not in llm.REQUEST_KEYS}
        return llm.LLMRequest(self.provider, str(body.get("model", "")), messages, params, tools)

    def parse_response(self, body: Any, streamed: bool) -> llm.LLMResponse:
        if streamed:
            return _responses_stream(llm.parse_sse(body if isinstance(body, str) else ""))
        return _responses(body) if isinstance(body, dict) else llm.LLMResponse()

    def stream_text(self, body: dict[str, Any]) -> str:
        return llm.sse([(e["type"], e) for e in _responses_events(body)])

    def is_response_body(self, value: Any) -> bool:
        return isinstance(value, dict) and "output" in value

    def answer_body(self, body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
        """A body whose output is the message: an ``output_text`` message item for its
        text, a ``function_call`` item for each tool call."""
        message, calls = llm.assistant_message(value)
        output: list[Any] = []
        content = message.get("content")
        if content:
            parts = content if isinstance(content, list) else [content]
            text = [
                p if isinstance(p, dict) else {"type": "output_text", "text": str(p)} for p in parts
            ]
            output.append(message_item("msg_override", text))
        for i, call in enumerate(calls):
            if isinstance(call, dict) and call.get("type") == "function_call":
                output.append(call)
            else:
                output.append(function_call_item(f"fc_override_{i}", *llm.short_call(call, i)))
        body.update(object="response", status="completed", output=output)
        return body

    def chat_messages(self, messages: list[Any]) -> list[Any]:
        return chat_messages(messages)

    def imported_url(self, model: str, origin: str | None) -> str:
        return f"{origin or 'https://api.openai.com'}/v1/responses"

    def imported_request(self, call: llm.Imported) -> dict[str, JsonValue]:
        body: dict[str, JsonValue] = {"model": call.model, "input": call.messages, **call.params}
        if call.tools:
            body["tools"] = call.tools
        return body

    def imported_response(self, call: llm.Imported) -> dict[str, JsonValue]:
        answer = {"content": call.answer.get("text"), "tool_calls": call.answer.get("tool_calls")}
        base: dict[str, Any] = {"id": call.response_id, "created_at": call.created}
        body: dict[str, JsonValue] = self.answer_body({**base, "model": call.model}, answer)
        if call.usage:
            body["usage"] = call.usage
        return body


API = Responses()


def _responses(body: dict[str, Any]) -> llm.LLMResponse:
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
    return llm.LLMResponse(
        {"text": "".join(text), "tool_calls": calls, "stop_reason": body.get("status")},
        body.get("usage") or {},
        llm.meta(body, "id", "model", "created_at", "service_tier"),
    )


def _responses_stream(events: list[tuple[str, Any]]) -> llm.LLMResponse:
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


# --- writing: output items, and a whole response as its stream ---------------------------


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
