"""One recorded response replaced by another: what ``sandbox replay --override STEP=VALUE``
serves at STEP instead of what the run recorded.

What ``VALUE`` means depends on the kind of the step:

* **llm**: the assistant's message: a string (its text), or a message ``{"content": ...,
  "tool_calls": [{"name": ..., "arguments": {...}}]}`` (tool calls in this short form or the
  API's wire form; for the messages API ``{"content": [blocks]}``), written in the shape of
  the call's API (:meth:`sandbox.seam.llm.LLMApi.answer_body`); or the provider's whole
  response body. A streamed answer is served as its API's stream of that body
  (:meth:`sandbox.seam.llm.LLMApi.stream_text`). The step may name the model call or its
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
    name = call.provider_meta.get("api")
    api = llm.api(name)
    body = _answer_body(call, exchange, value, blobs)
    if not exchange.streamed:
        return _http_body(exchange, body)
    if api is None or not isinstance(body, dict):
        raise ForkError(
            f"step {call.seq}: a streamed {name or 'model'} answer cannot be overridden"
        )
    return _http_body(exchange, api.stream_text(body), streamed=True)


def _answer_body(
    call: LLMCall, exchange: HTTPExchange, value: JsonValue, blobs: Callable[[str], bytes]
) -> JsonValue:
    """The whole response body ``value`` stands for: itself when it is one, else the recorded
    body (or, for a stream, the recorded response's identity) answering with ``value``."""
    name = call.provider_meta.get("api")
    if _whole_body(value):
        return value
    recorded = None if exchange.streamed else _recorded_body(exchange, blobs)
    if isinstance(recorded, dict):
        body = copy.deepcopy(recorded)
    else:
        body = {k: v for k, v in call.provider_meta.items() if k != "api"}
    api = llm.api(name)
    if api is not None:
        return api.answer_body(body, value)
    raise ForkError(
        f"step {call.seq}: give the whole response body to override a {name or 'model'} answer"
    )


def _whole_body(value: JsonValue) -> bool:
    return any(api.is_response_body(value) for api in llm.apis())
