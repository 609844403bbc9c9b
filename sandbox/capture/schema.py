"""A tool's schema from its Python signature: name, description, parameters as JSON Schema."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import JsonValue, TypeAdapter


def _annotation_schema(annotation: Any) -> dict[str, JsonValue]:
    if annotation is inspect.Parameter.empty:
        return {}
    try:
        schema: dict[str, JsonValue] = TypeAdapter(annotation).json_schema()
        return schema
    except Exception:
        return {"x-python-type": getattr(annotation, "__name__", repr(annotation))}


def tool_schema(fn: Callable[..., Any], name: str | None = None) -> dict[str, JsonValue]:
    """``{"name", "description", "parameters": {"type": "object", "properties", "required"},
    "returns"}`` derived from ``fn``'s signature and annotations."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    properties: dict[str, JsonValue] = {}
    required: list[JsonValue] = []
    for pname, param in sig.parameters.items():
        if pname in {"self", "cls"} or param.kind in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            continue
        prop = _annotation_schema(hints.get(pname, param.annotation))
        if param.default is param.empty:
            required.append(pname)
        else:
            try:
                TypeAdapter(Any).dump_python(param.default, mode="json")
                prop = {**prop, "default": TypeAdapter(Any).dump_python(param.default, mode="json")}
            except Exception:
                prop = {**prop, "default": repr(param.default)}
        properties[pname] = prop
    doc = inspect.getdoc(fn) or ""
    out: dict[str, JsonValue] = {
        "name": name or getattr(fn, "__name__", "tool"),
        "description": doc.split("\n\n")[0].strip(),
        "parameters": {"type": "object", "properties": properties, "required": required},
    }
    if "return" in hints or sig.return_annotation is not sig.empty:
        out["returns"] = _annotation_schema(hints.get("return", sig.return_annotation))
    return out
