"""pydantic-ai tools: ``FunctionToolset.call_tool``, through which an agent runs every tool
registered with ``@agent.tool``, ``@agent.tool_plain``, ``tools=[...]`` or a
``FunctionToolset`` (validated arguments in, the function's return value out).

The event's arguments are the validated arguments, its schema the tool definition the model
is offered (name, description, parameters), its output the return value as JSON, or the
exception (a ``ModelRetry`` too: replay raises it again, and the agent asks the model to
retry as it did). Replay hands the recorded JSON back in place of the return value.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from sandbox.capture.imports import ImportPatch, Undo
from sandbox.capture.tools import ToolAdapter
from sandbox.seam import boundary


def tool_schema(tool: Any) -> dict[str, JsonValue]:
    definition = tool.tool_def
    return {
        "name": definition.name,
        "description": definition.description or "",
        "parameters": definition.parameters_json_schema,
    }


def _apply() -> Undo:
    from pydantic_ai.toolsets.function import FunctionToolset

    from sandbox.capture.recorder import jsonable_value

    call_tool = FunctionToolset.call_tool

    async def patched(self: Any, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        if boundary.current() is None:
            return await call_tool(self, name, tool_args, ctx, tool)
        args = jsonable_value(tool_args)
        return await boundary.athrough(
            "tool",
            name,
            args if isinstance(args, dict) else {"input": args},
            lambda: call_tool(self, name, tool_args, ctx, tool),
            ToolAdapter(tool_schema(tool)),
        )

    FunctionToolset.call_tool = patched  # type: ignore[method-assign]

    def undo() -> None:
        FunctionToolset.call_tool = call_tool  # type: ignore[method-assign]

    return undo


PATCH = ImportPatch("pydantic_ai", _apply)
