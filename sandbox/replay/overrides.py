"""One recorded response replaced by another: what ``sandbox replay --override STEP=VALUE``
serves at STEP instead of what the run recorded.

What ``VALUE`` means depends on the kind of the step:

* **llm**: the assistant's message: a string (its text), or for the OpenAI chat-completions
  and Responses APIs a message ``{"content": ..., "tool_calls": [{"name": ..., "arguments":
  {...}}]}`` (tool calls in this short form or the API's wire form), for the messages API
  ``{"content": [blocks]}``; or the provider's whole response body (it has ``choices``,
  ``output``, or ``type: message``). A streamed answer is served as its API's stream of
  that body (:func:`sandbox.seam.llm.stream_text`). The step may name the model call or its
  HTTP exchange;
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


def _http_body(exchange: HTTPExchange, body: JsonValue, streamed: bool = False) -> HTTPExchange:
    return exchange.model_copy(
        update={
            "response_body": body,
            "response_blob": None,
            "status": exchange.status or 200,
            "streamed": streamed,
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
    """The exchange answering with ``value``, in the recorded exchange's form: the response
    body, or (for a streamed answer) the stream its API sends that body as."""
    api = call.provider_meta.get("api")
    body = _answer_body(call, exchange, value, blobs)
    if not exchange.streamed:
        return _http_body(exchange, body)
    if api not in {llm.CHAT, llm.RESPONSES, llm.MESSAGES} or not isinstance(body, dict):
        raise ForkError(f"step {call.seq}: a streamed {api or 'model'} answer cannot be overridden")
    return _http_body(exchange, llm.stream_text(str(api), body), streamed=True)


def _answer_body(
    call: LLMCall, exchange: HTTPExchange, value: JsonValue, blobs: Callable[[str], bytes]
) -> JsonValue:
    """The whole response body ``value`` stands for: itself when it is one, else the recorded
    body (or, for a stream, the recorded response's identity) answering with ``value``."""
    api = call.provider_meta.get("api")
    if _whole_body(value):
        return value
    recorded = None if exchange.streamed else _recorded_body(exchange, blobs)
    if isinstance(recorded, dict):
        body = copy.deepcopy(recorded)
    else:
        body = {k: v for k, v in call.provider_meta.items() if k != "api"}
    if api == llm.CHAT:
        return _chat_body(body, value)
    if api == llm.RESPONSES:
        return _responses_body(body, value)
    if api == llm.MESSAGES:
        return _messages_body(body, value)
    raise ForkError(
        f"step {call.seq}: give the whole response body to override a {api or 'model'} answer"
    )


def _whole_body(value: JsonValue) -> bool:
    return isinstance(value, dict) and (
        "choices" in value or "output" in value or value.get("type") == "message"
    )


def _chat_body(body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
    message, calls = _message(value)
    message["role"] = "assistant"
    message["tool_calls"] = [_wire_call(c, i) for i, c in enumerate(calls)] or None
    if message["tool_calls"] is None:
        del message["tool_calls"]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    body["choices"] = [choice]
    body.setdefault("object", "chat.completion")
    return body


def _message(value: JsonValue) -> tuple[dict[str, Any], list[Any]]:
    """An assistant message override as a message and its tool calls (a list)."""
    message: dict[str, Any] = (
        {"content": value} if not isinstance(value, dict) else {"content": None, **value}
    )
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ForkError("tool_calls in a model override is a list")
    return message, calls


def _short_call(call: Any, index: int) -> tuple[str, str, str]:
    """A tool call in the short form: its id, name and arguments (as a JSON string)."""
    if not isinstance(call, dict):
        raise ForkError('a tool call in a model override is {"name": ..., "arguments": {...}}')
    arguments = call.get("arguments", {})
    return (
        str(call.get("id", f"call_override_{index}")),
        str(call.get("name", "")),
        arguments if isinstance(arguments, str) else json.dumps(arguments),
    )


def _wire_call(call: Any, index: int) -> dict[str, Any]:
    if isinstance(call, dict) and "function" in call:
        return call
    call_id, name, arguments = _short_call(call, index)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _responses_body(body: dict[str, Any], value: JsonValue) -> dict[str, Any]:
    """A Responses API body whose output is the message: an ``output_text`` message item
    for its text, a ``function_call`` item for each tool call."""
    message, calls = _message(value)
    output: list[Any] = []
    content = message.get("content")
    if content:
        parts = content if isinstance(content, list) else [content]
        text = [
            p if isinstance(p, dict) else {"type": "output_text", "text": str(p)} for p in parts
        ]
        output.append(llm.message_item("msg_override", text))
    for i, call in enumerate(calls):
        if isinstance(call, dict) and call.get("type") == "function_call":
            output.append(call)
        else:
            output.append(llm.function_call_item(f"fc_override_{i}", *_short_call(call, i)))
    body.update(object="response", status="completed", output=output)
    return body


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
