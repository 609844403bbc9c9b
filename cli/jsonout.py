"""``--json``: a command's result as one JSON object on stdout, with the exit code the
command has without it. A command says it was asked for JSON (:func:`requested`) before it
does anything that can fail, so that an error it raises is one JSON object too (``ok``
false, ``error`` the line stderr gets)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import typer

_requested: ContextVar[bool] = ContextVar("sandbox_cli_json", default=False)


def requested(as_json: bool) -> bool:
    """Note whether this command prints JSON; return ``as_json``."""
    _requested.set(as_json)
    return as_json


def reset() -> None:
    _requested.set(False)


def wanted() -> bool:
    return _requested.get()


def emit(result: Mapping[str, Any]) -> None:
    """Print the result: one JSON object."""
    typer.echo(json.dumps(dict(result), indent=2, default=str))


def emit_error(line: str, exit_code: int) -> None:
    """Print a command's error as its JSON result (stderr has the line too)."""
    emit({"ok": False, "exit_code": exit_code, "error": line})
