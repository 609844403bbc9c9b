"""Whose code a frame runs: the standard library's (the import machinery too), the
sandbox's, an installed library's, or the agent's own. What is the run's (a random draw, a
request nothing records) is told apart by the code that asked for it
(:func:`sandbox.capture.entropy.not_the_runs`, :func:`asker`)."""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

Origin = Literal["stdlib", "sandbox", "library", "agent"]
_LIBRARY_DIRS = ("/site-packages/", "/dist-packages/")
_SCRIPT_DIRS = tuple(
    {os.path.join(prefix, "bin") + os.sep for prefix in (sys.prefix, sys.exec_prefix)}
)
"""Where an installed package's console scripts are (``.venv/bin/pytest``): library code."""
IMPORTING = "<frozen importlib._bootstrap"
"""The file name of the import machinery's frames (a module's code runs under them)."""


def origin(frame: Any) -> Origin:
    """Whose code ``frame`` runs (told once for each code object and module: a stack is
    walked at every environment read and every draw)."""
    module = frame.f_globals.get("__name__", "")
    key = (frame.f_code, module)
    found = _ORIGINS.get(key)
    if found is None:
        found = _origin_of(str(module), frame.f_code.co_filename)
        if len(_ORIGINS) >= 4096:
            _ORIGINS.clear()
        _ORIGINS[key] = found
    return found


_ORIGINS: dict[tuple[Any, Any], Origin] = {}


def _origin_of(module: str, filename: str) -> Origin:
    if module.split(".")[0] in sys.stdlib_module_names:
        return "stdlib"
    if module.startswith("sandbox."):
        return "sandbox"
    if any(d in filename for d in _LIBRARY_DIRS) or filename.startswith(_SCRIPT_DIRS):
        return "library"
    return "agent"


def asker(depth: int = 1) -> Origin | None:
    """Whose code made the call the caller of this function is handling (``depth`` frames
    above it): the first frame, outward, that is neither the standard library's nor an
    installed library's (``None`` when there is none: a library's thread)."""
    frame: Any = sys._getframe(depth + 1)
    while frame is not None:
        found = origin(frame)
        if found in ("sandbox", "agent"):
            return found
        frame = frame.f_back
    return None
