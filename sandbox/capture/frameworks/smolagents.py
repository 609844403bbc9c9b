"""smolagents tools: ``Tool.__call__``, through which a ``ToolCallingAgent`` runs every tool
(``@tool`` functions, ``Tool`` subclasses, the final answer) and a ``CodeAgent``'s code calls
them.

The event's arguments are the keyword arguments the tool is called with (positional ones
under ``args``), its schema the tool's name, description and ``inputs`` (its output type
among them), its output the return value as JSON, or the exception. Replay hands the
recorded JSON back in place of the return value.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from sandbox.capture.imports import ImportPatch, Undo
from sandbox.capture.tools import ToolAdapter
from sandbox.seam import boundary


def tool_schema(tool: Any) -> dict[str, JsonValue]:
    from sandbox.capture.recorder import jsonable_value

    return {
        "name": str(tool.name),
        "description": str(getattr(tool, "description", "") or ""),
        "parameters": jsonable_value(getattr(tool, "inputs", {})),
        "output_type": str(getattr(tool, "output_type", "")),
    }


def tool_request(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, JsonValue]:
    """The arguments as the agent passed them: one dict of them (as a ``CodeAgent``'s code
    may pass it) read as keyword arguments."""
    from sandbox.capture.recorder import jsonable_value

    if len(args) == 1 and not kwargs and isinstance(args[0], dict):
        kwargs, args = args[0], ()
    positional = {"args": list(args)} if args else {}
    request = jsonable_value({**kwargs, **positional})
    return request if isinstance(request, dict) else {"input": request}


def _apply() -> Undo:
    from smolagents.tools import Tool

    original = Tool.__call__

    def patched(self: Any, *args: Any, sanitize_inputs_outputs: bool = False, **kwargs: Any) -> Any:
        def perform() -> Any:
            return original(self, *args, sanitize_inputs_outputs=sanitize_inputs_outputs, **kwargs)

        if boundary.current() is None:
            return perform()
        return boundary.through(
            "tool",
            str(self.name),
            tool_request(args, kwargs),
            perform,
            ToolAdapter(tool_schema(self)),
        )

    Tool.__call__ = patched

    def undo() -> None:
        Tool.__call__ = original

    return undo


PATCH = ImportPatch("smolagents", _apply)
