"""Whose code a frame runs: the standard library's (the import machinery too), the
sandbox's, an installed library's, or the agent's own. What is the run's (a random draw, a
request nothing records) is told apart by the code that asked for it
(:func:`sandbox.capture.entropy.not_the_runs`, :func:`asker`)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, Literal, TypeVar

Origin = Literal["stdlib", "sandbox", "library", "agent"]
F = TypeVar("F", bound=Callable[..., Any])
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
    return _origin_of(frame.f_code, frame.f_globals.get("__name__", ""))


_PASSED_THROUGH: set[Any] = set()
"""The code of the sandbox's functions that only run the code handed to them (see
:func:`passed_through`)."""


def passed_through(fn: F) -> F:
    """Mark ``fn``, a function of the sandbox that only runs the code it is handed (in a
    pool's worker thread, say), as no one's: a stack walk goes past its frames (as the
    standard library's) to the code that asked, not taking it for the sandbox's own."""
    _PASSED_THROUGH.add(fn.__code__)
    return fn


@functools.lru_cache(maxsize=4096)
def _origin_of(code: Any, module: Any) -> Origin:
    if code in _PASSED_THROUGH:
        return "stdlib"
    name = str(module)
    if name.split(".")[0] in sys.stdlib_module_names:
        return "stdlib"
    if name.startswith("sandbox."):
        return "sandbox"
    filename = code.co_filename
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
