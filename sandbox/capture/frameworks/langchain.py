"""LangChain and LangGraph tools: ``BaseTool.run`` and ``BaseTool.arun``, through which
every tool runs (``invoke``, ``ainvoke``, LangGraph's ``ToolNode``, a direct ``run``).

The event's arguments are the tool's input (a string input as ``{"input": ...}``) without
the arguments the framework injects (a LangGraph ``ToolRuntime``, its state), its
schema the one LangChain hands a model (``convert_to_openai_tool``), its output the content
the tool returned: for a call made with a ``tool_call_id`` (a model's tool call), the
content of the ``ToolMessage``, which replay builds again around the recorded content. An
artifact (``response_format="content_and_artifact"``) is not recorded.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import JsonValue

from sandbox.capture.imports import ImportPatch, Undo
from sandbox.capture.tools import ToolAdapter
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome
from sandbox.snapshot.events import Event


def tool_schema(tool: Any) -> dict[str, JsonValue]:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from sandbox.capture.recorder import jsonable_value

    try:
        schema = jsonable_value(convert_to_openai_tool(tool)["function"])
    except Exception:  # a tool whose schema cannot be built still runs
        return {"name": tool.name}
    return schema if isinstance(schema, dict) else {"name": tool.name}


def tool_request(tool: Any, tool_input: Any) -> dict[str, JsonValue]:
    """The call's arguments: the tool's input without what the framework injects
    (``InjectedToolArg``, ``ToolRuntime``, ``InjectedState``: LangGraph's config, state and
    store, which are not the model's and differ each run), as LangChain leaves them out of
    its own traces."""
    from sandbox.capture.recorder import jsonable_value

    strip = getattr(tool, "_filter_injected_args", None)
    if isinstance(tool_input, dict) and callable(strip):
        with contextlib.suppress(Exception):  # the arguments as given, then
            tool_input = strip(tool_input)
    data = jsonable_value(tool_input)
    return data if isinstance(data, dict) else {"input": data}


class LangChainToolAdapter:
    """A :class:`ToolAdapter` that records a ``ToolMessage``'s content and rebuilds the
    message on replay."""

    def __init__(self, tool: Any, tool_call_id: str | None) -> None:
        self.inner = ToolAdapter(tool_schema(tool))
        self.name = str(tool.name)
        self.tool_call_id = tool_call_id

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        from langchain_core.messages import ToolMessage

        value = outcome.value
        content = value.content if isinstance(value, ToolMessage) else value
        self.inner.record(call, Outcome(content, outcome.error, outcome.duration), emitter)
        return value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        from langchain_core.messages import ToolMessage

        content = self.inner.replay(call, event, blobs)
        if self.tool_call_id is None:
            return content
        return ToolMessage(content, tool_call_id=self.tool_call_id, name=self.name)


def _apply() -> Undo:
    from langchain_core.tools import BaseTool

    run, arun = BaseTool.run, BaseTool.arun

    def patched_run(self: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        if boundary.current() is None:
            return run(self, tool_input, *args, **kwargs)
        adapter = LangChainToolAdapter(self, kwargs.get("tool_call_id"))
        return boundary.through(
            "tool",
            str(self.name),
            tool_request(self, tool_input),
            lambda: run(self, tool_input, *args, **kwargs),
            adapter,
        )

    async def patched_arun(self: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        if boundary.current() is None:
            return await arun(self, tool_input, *args, **kwargs)
        adapter = LangChainToolAdapter(self, kwargs.get("tool_call_id"))
        return await boundary.athrough(
            "tool",
            str(self.name),
            tool_request(self, tool_input),
            lambda: arun(self, tool_input, *args, **kwargs),
            adapter,
        )

    BaseTool.run = patched_run  # type: ignore[method-assign]
    BaseTool.arun = patched_arun  # type: ignore[method-assign]

    def undo() -> None:
        BaseTool.run = run  # type: ignore[method-assign]
        BaseTool.arun = arun  # type: ignore[method-assign]

    return undo


PATCH = ImportPatch("langchain_core.tools", _apply)
