"""Span attributes of an event: the GenAI semantic conventions (``gen_ai.*``) and, where
Arize Phoenix reads them, the OpenInference ones (``openinference.span.kind``, ``llm.*``,
``tool.*``, ``input.value``, ``output.value``, ``retrieval.documents.*``).

Attribute values are what OpenTelemetry allows: strings, numbers, booleans and lists of
them; anything structured is JSON text, as both conventions say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from sandbox.otel import messages
from sandbox.seam import llm
from sandbox.snapshot.events import Event, HTTPExchange, LLMCall, Retrieval, ToolCall

Attributes = dict[str, AttributeValue]

SPAN_KIND = "openinference.span.kind"
OPERATION = "gen_ai.operation.name"

PARAMS: Mapping[str, str] = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
    "stop": "gen_ai.request.stop_sequences",
}
"""Request parameters (OpenAI names) and their GenAI attributes."""

MCP_TOOL_CALL = "tools/call"

USAGE_IN = ("prompt_tokens", "input_tokens")
USAGE_OUT = ("completion_tokens", "output_tokens")


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _scalar(value: Any) -> AttributeValue | None:
    """An attribute value for a JSON value: scalars as they are, homogeneous lists of
    strings or numbers as lists, anything else ``None`` (the caller writes JSON)."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return None


def _usage(usage: Mapping[str, Any]) -> Attributes:
    out: Attributes = {}
    for key in USAGE_IN:
        if isinstance(usage.get(key), int):
            out["gen_ai.usage.input_tokens"] = out["llm.token_count.prompt"] = usage[key]
    for key in USAGE_OUT:
        if isinstance(usage.get(key), int):
            out["gen_ai.usage.output_tokens"] = out["llm.token_count.completion"] = usage[key]
    total = usage.get("total_tokens")
    if isinstance(total, int):
        out["llm.token_count.total"] = total
    return out


def _openinference_messages(prefix: str, wire: list[Any]) -> Attributes:
    """``llm.input_messages.{i}.message.*`` (flattened, as Phoenix reads them)."""
    out: Attributes = {}
    for i, raw in enumerate(wire):
        if not isinstance(raw, dict):
            continue
        at = f"{prefix}.{i}.message"
        out[f"{at}.role"] = str(raw.get("role", ""))
        content = raw.get("content")
        if content is not None:
            out[f"{at}.content"] = content if isinstance(content, str) else as_json(content)
        if raw.get("tool_call_id") is not None:
            out[f"{at}.tool_call_id"] = str(raw["tool_call_id"])
        for j, call in enumerate(raw.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            fn = call.get("function") or call
            tc = f"{at}.tool_calls.{j}.tool_call"
            if call.get("id") is not None:
                out[f"{tc}.id"] = str(call["id"])
            out[f"{tc}.function.name"] = str(fn.get("name", ""))
            args = fn.get("arguments")
            out[f"{tc}.function.arguments"] = args if isinstance(args, str) else as_json(args)
    return out


def llm_attributes(event: LLMCall) -> Attributes:
    wire = llm.chat_messages(event.provider_meta.get("api"), event.messages)
    out: Attributes = {
        SPAN_KIND: "LLM",
        OPERATION: "chat",
        "gen_ai.provider.name": event.provider,
        "gen_ai.system": event.provider,
        "gen_ai.request.model": event.model,
        "llm.provider": event.provider,
        "llm.system": event.provider,
        "llm.model_name": event.model,
        "gen_ai.input.messages": as_json(messages.to_genai(wire)),
        "gen_ai.output.messages": as_json(messages.response_to_genai(event.response)),
        "llm.invocation_parameters": as_json(event.params),
        "input.value": as_json({"messages": event.messages, **event.params}),
        "input.mime_type": "application/json",
        "output.value": as_json(event.response),
        "output.mime_type": "application/json",
    }
    api = event.provider_meta.get("api")
    if isinstance(api, str):
        out["sandbox.llm.api"] = api
    for name, key in PARAMS.items():
        value = _scalar(event.params.get(name))
        if value is not None:
            out[key] = value
    if event.tools:
        out["gen_ai.tool.definitions"] = as_json(event.tools)
        for i, tool in enumerate(event.tools):
            out[f"llm.tools.{i}.tool.json_schema"] = as_json(tool)
    if isinstance(event.response, dict) and event.response.get("stop_reason") is not None:
        out["gen_ai.response.finish_reasons"] = [str(event.response["stop_reason"])]
    for meta, key in (("id", "gen_ai.response.id"), ("model", "gen_ai.response.model")):
        if isinstance(event.provider_meta.get(meta), str):
            out[key] = event.provider_meta[meta]
    out.update(_usage(event.usage))
    out.update(_openinference_messages("llm.input_messages", wire))
    out.update(
        _openinference_messages("llm.output_messages", [messages.answer_message(event.response)])
    )
    return out


def _mcp_attributes(event: ToolCall) -> Attributes:
    """An MCP request's ``mcp.*`` attributes (the MCP semantic conventions)."""
    if event.mcp is None:
        return {}
    out: Attributes = {"mcp.method.name": event.mcp.method, "sandbox.mcp.server": event.mcp.server}
    kind = event.mcp.transport.get("kind")
    if isinstance(kind, str):
        out["network.transport"] = "pipe" if kind == "stdio" else "tcp"
    return out


def is_tool_execution(event: ToolCall) -> bool:
    """A tool call proper: a function tool, or an MCP ``tools/call`` (an MCP protocol call
    such as ``initialize`` or ``tools/list`` executes no tool)."""
    return event.mcp is None or event.mcp.method == MCP_TOOL_CALL


def mcp_protocol_attributes(event: ToolCall) -> Attributes:
    """An MCP protocol call (``initialize``, ``tools/list`` ...): a ``CHAIN`` span with its
    params and result, no ``gen_ai`` operation."""
    out: Attributes = {
        SPAN_KIND: "CHAIN",
        "input.value": as_json(event.args),
        "input.mime_type": "application/json",
        **_mcp_attributes(event),
    }
    if event.error is None:
        out["output.value"] = as_json(event.output)
        out["output.mime_type"] = "application/json"
    return out


def tool_attributes(event: ToolCall) -> Attributes:
    if not is_tool_execution(event):
        return mcp_protocol_attributes(event)
    out: Attributes = {
        SPAN_KIND: "TOOL",
        OPERATION: "execute_tool",
        "gen_ai.tool.name": event.name,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": as_json(event.args),
        "tool.name": event.name,
        "tool.parameters": as_json(event.tool_schema.get("parameters", {})),
        "input.value": as_json(event.args),
        "input.mime_type": "application/json",
    }
    description = event.tool_schema.get("description")
    if isinstance(description, str):
        out["tool.description"] = out["gen_ai.tool.description"] = description
    if event.error is None:
        out["gen_ai.tool.call.result"] = out["output.value"] = as_json(event.output)
        out["output.mime_type"] = "application/json"
    out.update(_mcp_attributes(event))
    return out


def retrieval_attributes(event: Retrieval) -> Attributes:
    out: Attributes = {
        SPAN_KIND: "RETRIEVER",
        OPERATION: "retrieval",
        "input.value": event.query if isinstance(event.query, str) else as_json(event.query),
    }
    for i, doc in enumerate(event.documents):
        at = f"retrieval.documents.{i}.document"
        out[f"{at}.id"] = doc.id
        if doc.score is not None:
            out[f"{at}.score"] = doc.score
        out[f"{at}.metadata"] = as_json({"sha256": doc.sha256, **doc.metadata})
    return out


def http_attributes(event: HTTPExchange) -> Attributes:
    out: Attributes = {
        SPAN_KIND: "CHAIN",
        "http.request.method": event.method,
        "url.full": event.url,
    }
    if event.status is not None:
        out["http.response.status_code"] = event.status
    return out


def event_attributes(event: Event) -> Attributes:
    """Every attribute of an event's span: the kind's conventions, then ``sandbox.*`` (the
    event's place in the run)."""
    match event:
        case LLMCall():
            out = llm_attributes(event)
        case ToolCall():
            out = tool_attributes(event)
        case Retrieval():
            out = retrieval_attributes(event)
        case HTTPExchange():
            out = http_attributes(event)
        case _:
            out = {SPAN_KIND: "CHAIN", "output.value": as_json(event.model_dump(mode="json"))}
    out["sandbox.seq"] = event.seq
    out["sandbox.kind"] = event.kind
    out["sandbox.task"] = event.task
    if event.attempt is not None:
        out["sandbox.attempt"] = event.attempt
    return out


def span_name(event: Event) -> str:
    """GenAI span names: ``chat {model}``, ``execute_tool {name}``; an MCP protocol call
    ``{method} {server}`` (the MCP conventions); others by kind."""
    match event:
        case LLMCall():
            return f"chat {event.model}".rstrip()
        case ToolCall() if not is_tool_execution(event) and event.mcp is not None:
            return f"{event.mcp.method} {event.mcp.server}".rstrip()
        case ToolCall():
            return f"execute_tool {event.name}"
        case HTTPExchange():
            return f"{event.method} {event.url}"
        case _:
            return f"{event.kind} {event.name}".rstrip()
