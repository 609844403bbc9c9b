"""One recorded response replaced by another: what ``sandbox replay --override STEP=VALUE``
serves at STEP instead of what the run recorded.

What ``VALUE`` means depends on the kind of the step:

* **llm**: the assistant's message: a string (its text), or for the chat-completions API a
  message ``{"content": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}`` (tool calls
  in this short form or the wire form), for the messages API ``{"content": [blocks]}``; or
  the provider's whole response body (it has ``choices``, ``output``, or ``type: message``).
  The step may name the model call or its HTTP exchange;
* **tool**: the tool's output (the recorded error, if any, is dropped);
* **retrieval**: the documents, a list of strings or of ``{"id", "content", "score",
  "metadata"}``;
* **http**: the response body (the recorded status is kept).

:func:`override_event` returns the recorded events to put in place of the old ones (a model
call's override edits its HTTP exchange, which is what replay answers with).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import JsonValue

from sandbox.errors import ForkError
from sandbox.seam import llm
from sandbox.snapshot.events import (
    BlobRef,
    Event,
    HTTPExchange,
    LLMCall,
    Retrieval,
    RetrievedDoc,
    ToolCall,
)

PutBlob = Callable[[bytes, str], BlobRef]
"""Stores a payload by content (``store.put_blob``)."""
OVERRIDABLE = ("llm", "tool", "retrieval", "http")


def override_event(
    event: Event,
    value: JsonValue,
    exchanges: Mapping[int, HTTPExchange],
    blobs: Callable[[str], bytes],
    put_blob: PutBlob,
) -> list[Event]:
    """The events that replace ``event`` (and, for a model call, its HTTP exchange, found in
    ``exchanges`` by span) so that replay answers with ``value``."""
    if isinstance(event, ToolCall):
        return [event.model_copy(update={"output": value, "output_blob": None, "error": None})]
    if isinstance(event, Retrieval):
        return [event.model_copy(update={"documents": _documents(value, put_blob), "error": None})]
    if isinstance(event, LLMCall):
        exchange = exchanges.get(event.parent_span) if event.parent_span is not None else None
        if exchange is None:
            raise ForkError(f"step {event.seq}: the model call has no HTTP exchange to edit")
        return [_model_answer(event, exchange, value, blobs)]
    if isinstance(event, HTTPExchange):
        return [_http_body(event, value)]
    raise ForkError(
        f"step {event.seq} is a {event.kind} event; an override replaces the response of "
        f"one of: {', '.join(OVERRIDABLE)}"
    )


def _http_body(exchange: HTTPExchange, body: JsonValue) -> HTTPExchange:
    return exchange.model_copy(
        update={
            "response_body": body,
            "response_blob": None,
            "status": exchange.status or 200,
            "streamed": False,
            "error": None,
        }
    )


def _documents(value: JsonValue, put_blob: PutBlob) -> list[RetrievedDoc]:
    if not isinstance(value, list):
        raise ForkError("a retrieval override is a list of documents (strings or objects)")
    docs: list[RetrievedDoc] = []
    for i, item in enumerate(value):
        doc: dict[str, Any] = item if isinstance(item, dict) else {"content": item}
        content = doc.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        data = text.encode()
        metadata = doc.get("metadata")
        score = doc.get("score")
        docs.append(
            RetrievedDoc(
                id=str(doc.get("id", f"override-{i}")),
                sha256=hashlib.sha256(data).hexdigest(),
                blob=put_blob(data, "text/plain; charset=utf-8"),
                score=float(score) if isinstance(score, int | float) else None,
                metadata=metadata if isinstance(metadata, dict) else {},
            )
        )
    return docs


def _recorded_body(exchange: HTTPExchange, blobs: Callable[[str], bytes]) -> Any:
    if exchange.response_blob is not None:
        try:
            return json.loads(blobs(exchange.response_blob.sha256))
        except ValueError:
            return None
    return exchange.response_body


def _model_answer(
    call: LLMCall, exchange: HTTPExchange, value: JsonValue, blobs: Callable[[str], bytes]
) -> HTTPExchange:
    api = call.provider_meta.get("api")
    if _whole_body(value):
        return _http_body(exchange, value)
    if exchange.streamed:
        raise ForkError(
            f"step {call.seq}: the model's answer was streamed; give the whole response body "
            "to override it"
        )
    recorded = _recorded_body(exchange, blobs)
    body = copy.deepcopy(recorded) if isinstance(recorded, dict) else {}
    if api == llm.CHAT:
        return _http_body(exchange, _chat_body(body, value))
    if api == llm.MESSAGES:
        return _http_body(exchange, _messages_body(body, value))
    raise ForkError(
        f"step {call.seq}: give the whole response body to override a {api or 'model'} answer"
    )


def _whole_body(value: JsonValue) -> bool:
    return isinstance(value, dict) and (
        "choices" in value or "output" in value or value.get("type") == "message"
    )


def _chat_body(body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
    message: dict[str, Any] = (
        {"content": value} if not isinstance(value, dict) else {"content": None, **value}
    )
    message["role"] = "assistant"
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ForkError("tool_calls in a model override is a list")
    message["tool_calls"] = [_wire_call(c, i) for i, c in enumerate(calls)] or None
    if message["tool_calls"] is None:
        del message["tool_calls"]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    body["choices"] = [choice]
    body.setdefault("object", "chat.completion")
    return body


def _wire_call(call: Any, index: int) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise ForkError('a tool call in a model override is {"name": ..., "arguments": {...}}')
    if "function" in call:
        return call
    arguments = call.get("arguments", {})
    return {
        "id": str(call.get("id", f"call_override_{index}")),
        "type": "function",
        "function": {
            "name": str(call.get("name", "")),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def _messages_body(body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
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
