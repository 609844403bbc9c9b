"""OpenAI Agents SDK function tools (``@function_tool``, ``function_tool(fn)``): the body of
every such tool, run by the SDK's failure-handling invoker (``FunctionTool.on_invoke_tool``);
and a ``FunctionTool`` built by hand with its own ``on_invoke_tool``, at the SDK's call of it.

The hook is that invoker's ``__call__``, at call time, with the tool's own body (argument
parsing and validation, the function, output validation) sent through the seam. Why there:

* It is the one place every decorator-made tool runs, whatever runs it: the run loop
  (``Runner.run``, ``run_sync``, streaming) and ``invoke_function_tool`` (realtime sessions)
  both call ``on_invoke_tool``, the SDK's public contract for a tool, and nothing else calls
  the function.
* It sees the function's output or its exception *before* the tool's failure policy
  (``failure_error_function``) turns an exception into the message the model reads. The
  event records the real error; on replay the recorded error is raised in the same place
  and the SDK's own policy turns it into the same message again (or fails the run, when the
  tool was built with ``failure_error_function=None``).
* Tools are often built at import time, before a capture starts: wrapping at construction
  would miss them; a call-time hook on the class does not.

The event's arguments are the JSON the model sent (an object; anything else as
``{"input": ...}``), its schema what the model is offered (name, description, the tool's
``params_json_schema``), its output the function's return value as JSON. Replay hands the
recorded JSON back in place of the return value. Not captured here: tools from an MCP
server (captured at the MCP client as ``mcp:SERVER/TOOL``) and agents used as tools (their
own model calls and tools are captured).

A ``FunctionTool`` built by hand has no SDK invoker around its body: its ``on_invoke_tool``
is the application's, and an exception from it fails the run. It is captured where the SDK
calls it, the helper both the run loop and ``invoke_function_tool`` use
(``_invoke_function_tool_with_metadata``, patched in the two modules that call it): the
event's output is what ``on_invoke_tool`` returned (the timeout message when the tool's
``timeout_seconds`` ran out, which replay hands back as an ordinary output).

Trace export: the SDK queues traces and spans for the provider's tracing endpoint and posts
them from a background thread. While a capture or replay is active, nothing is queued for
that exporter and any batch it would post is dropped (see :func:`_silence_backend_export`):
a capture sends no trace of the run out and records no exchange with the endpoint, and a
replay, where the request would be refused, neither reaches it nor fails or drifts because
of it. The SDK's other trace processors (ones the application registered) are untouched.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import logging
from typing import Any

from pydantic import JsonValue

from sandbox.capture.imports import ImportPatch, Undo, undo_all
from sandbox.capture.tools import ToolAdapter
from sandbox.seam import boundary

log = logging.getLogger(__name__)


def tool_schema(tool: Any) -> dict[str, JsonValue]:
    """What the model is offered: name, description, the parameters' JSON schema."""
    return {
        "name": tool.name,
        "description": tool.description or "",
        "parameters": tool.params_json_schema,
    }


def tool_request(arguments: str) -> dict[str, JsonValue]:
    """The arguments the model sent (a JSON string) as an object."""
    try:
        data = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"input": arguments}
    return data if isinstance(data, dict) else {"input": data}


def is_function_tool(tool: Any) -> bool:
    """A tool whose body is the application's function (not an MCP server's tool, whose
    call the MCP client capture records, nor an agent run as a tool)."""
    from agents.tool import ToolOriginType

    origin = tool._tool_origin
    return origin is None or origin.type is ToolOriginType.FUNCTION


def _capture_tool_calls() -> Undo:
    from agents.tool import _FailureHandlingFunctionToolInvoker as Invoker

    original = Invoker.__call__

    async def patched(self: Any, ctx: Any, arguments: str) -> Any:
        tool = self._function_tool
        if boundary.current() is None or tool is None or not is_function_tool(tool):
            return await original(self, ctx, arguments)
        body = self._invoke_tool_impl
        adapter = ToolAdapter(tool_schema(tool))

        async def crossing(ctx: Any, arguments: str) -> Any:
            return await boundary.athrough(
                "tool",
                str(tool.name),
                tool_request(arguments),
                lambda: body(ctx, arguments),
                adapter,
            )

        invoker = copy.copy(self)  # the SDK's own failure handling around the crossing
        invoker._invoke_tool_impl = crossing
        return await original(invoker, ctx, arguments)

    Invoker.__call__ = patched  # type: ignore[method-assign,assignment]

    def undo() -> None:
        Invoker.__call__ = original  # type: ignore[method-assign]

    return undo


def _capture_hand_built_calls() -> Undo:
    from agents import tool as tool_module
    from agents.run_internal import tool_execution
    from agents.tool import _FailureHandlingFunctionToolInvoker as Invoker
    from agents.tool import _FunctionToolInvocationResult as Result

    original = tool_module._invoke_function_tool_with_metadata

    async def patched(*, function_tool: Any, context: Any, arguments: str) -> Any:
        def invoke() -> Any:
            return original(function_tool=function_tool, context=context, arguments=arguments)

        if (
            boundary.current() is None
            or isinstance(function_tool.on_invoke_tool, Invoker)  # captured inside the invoker
            or not is_function_tool(function_tool)
        ):
            return await invoke()

        async def output() -> Any:
            return (await invoke()).output

        value = await boundary.athrough(
            "tool",
            str(function_tool.name),
            tool_request(arguments),
            output,
            ToolAdapter(tool_schema(function_tool)),
        )
        return Result(value)

    modules = [tool_module, tool_execution]
    for module in modules:
        module._invoke_function_tool_with_metadata = patched  # type: ignore[attr-defined]

    def undo() -> None:
        for module in modules:
            module._invoke_function_tool_with_metadata = original  # type: ignore[attr-defined]

    return undo


def _silence_backend_export() -> Undo:
    """While installed: the batch processor of the SDK's backend exporter queues nothing
    for a context a run or replay serves, and during a replay the exporter posts nothing (a
    batch queued before it started is dropped); outside any run the SDK exports as usual."""
    from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor

    exporter_export = BackendSpanExporter._export_with_deadline
    on_trace_start = BatchTraceProcessor.on_trace_start
    on_span_end = BatchTraceProcessor.on_span_end

    def drop(self: Any, items: list[Any], deadline: float | None) -> None:
        if boundary.installed() is None:  # no replay: what was queued is no run's
            exporter_export(self, items, deadline)
            return
        log.debug("trace export to %s dropped during a replay", self.endpoint)

    def trace_start(self: Any, trace: Any) -> None:
        if boundary.current() is None or not isinstance(self._exporter, BackendSpanExporter):
            on_trace_start(self, trace)

    def span_end(self: Any, span: Any) -> None:
        if boundary.current() is None or not isinstance(self._exporter, BackendSpanExporter):
            on_span_end(self, span)

    BackendSpanExporter._export_with_deadline = drop  # type: ignore[method-assign]
    BatchTraceProcessor.on_trace_start = trace_start  # type: ignore[method-assign]
    BatchTraceProcessor.on_span_end = span_end  # type: ignore[method-assign]

    def undo() -> None:
        BackendSpanExporter._export_with_deadline = exporter_export  # type: ignore[method-assign]
        BatchTraceProcessor.on_trace_start = on_trace_start  # type: ignore[method-assign]
        BatchTraceProcessor.on_span_end = on_span_end  # type: ignore[method-assign]

    return undo


def _warn_if_sdk() -> None:
    """Say so when the SDK is installed but its hooks are not where this adapter looks (a
    release that renamed them): its function tools then run uncaptured."""
    try:
        version = importlib.metadata.version("openai-agents")
    except importlib.metadata.PackageNotFoundError:
        return  # another package named ``agents``
    log.warning(
        "openai-agents %s: the tool-call hooks of the capture were not found; this SDK's "
        "function tools are not captured as tool events (their model calls still are)",
        version,
    )


def _apply() -> Undo:
    try:  # the names the hooks need (``agents`` may be another package of that name)
        import agents.run_internal.tool_execution  # noqa: F401
        from agents.tool import (  # noqa: F401
            _FailureHandlingFunctionToolInvoker,
            _FunctionToolInvocationResult,
            _invoke_function_tool_with_metadata,
        )
        from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor  # noqa: F401
    except ImportError:
        _warn_if_sdk()
        return lambda: None
    return undo_all([_capture_tool_calls(), _capture_hand_built_calls(), _silence_backend_export()])


PATCH = ImportPatch("agents", _apply)
