"""Faults from the recording, raised again on replay.

A recorded error is data (:class:`~sandbox.snapshot.events.ErrorInfo`: a qualified type
name, a message, the arguments and attributes that were JSON). :func:`rebuild_error` turns it
back into an exception of its original class, so the agent's own ``except`` clauses catch it
as they did at capture (``TimeoutError``, ``httpx.ReadTimeout``, the ``mcp`` SDK's
``MCPError`` with its ``ErrorData``): the class is looked up only among the modules the
replayed program has already imported (``sys.modules``; a module named by a snapshot is never
imported: a bundle is untrusted data), built from its recorded arguments (else its message),
or, when its constructor wants more than the recording holds, made without its constructor
with its recorded arguments and attributes set. Only when the class cannot be found or built
is a :class:`RecordedError` stand-in of that name raised (also a :class:`TimeoutError` when
the name says ``Timeout``), and :func:`stand_in_reason` says why, for the report.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from pydantic import BaseModel

from sandbox.seam.boundary import RecordedError, error_info
from sandbox.snapshot.events import ErrorInfo

_BUILTINS = sys.modules["builtins"]
STAND_IN_MODULE = "sandbox.replay.recorded"


def _resolve_object(qualified: str) -> object | None:
    """The already-imported object named ``module.QualName`` (or a builtin name)."""
    parts = qualified.split(".")
    candidates = [(_BUILTINS, parts)] if len(parts) == 1 else []
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            candidates.append((module, parts[cut:]))
    for owner, path in candidates:
        found: object = owner
        for attr in path:
            found = getattr(found, attr, None)
            if found is None:
                break
        if found is not None:
            return found
    return None


def _resolve(qualified: str) -> type[BaseException] | None:
    found = _resolve_object(qualified)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    return None


def _attribute(value: Any) -> Any:
    """A recorded attribute as the object it was: a pydantic model validated again when its
    class is imported here, else the JSON as recorded."""
    if isinstance(value, dict) and set(value) == {"model", "value"}:
        cls = _resolve_object(str(value["model"]))
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            with contextlib.suppress(Exception):
                return cls.model_validate(value["value"])
    return value


def _stand_in(info: ErrorInfo) -> type[RecordedError]:
    name = info.type.rsplit(".", 1)[-1] or "RecordedError"
    bases: tuple[type, ...] = (RecordedError,)
    if "Timeout" in info.type:
        bases = (RecordedError, TimeoutError)
    return type(name, bases, {"__module__": STAND_IN_MODULE})


def _built(cls: type[Exception], info: ErrorInfo) -> Exception | None:
    """``cls`` from its recorded arguments, else its message, else made without calling its
    constructor with the recorded arguments and attributes set; ``None`` when none works."""
    attempts: list[tuple[Any, ...]] = []
    if info.args is not None:
        attempts.append(tuple(info.args))
    if info.args != [info.message]:
        attempts.append((info.message,))
    for args in attempts:
        try:
            exc = cls(*args)
        except Exception:  # a constructor that wants other arguments
            continue
        if _same(exc, info):
            return exc
    try:
        exc = cls.__new__(cls)
        exc.args = tuple(info.args) if info.args is not None else (info.message,)
        for name, value in info.attrs.items():
            with contextlib.suppress(Exception):  # a read-only property: its source is set
                setattr(exc, name, _attribute(value))
        str(exc)  # a __str__ that needs what the recording does not hold fails here
    except Exception:
        return None
    return exc


def _same(exc: BaseException, info: ErrorInfo) -> bool:
    """Whether ``exc`` records as ``info`` does (only its message, for a recording that
    holds no arguments)."""
    if info.args is None and not info.attrs:
        return str(exc) == info.message
    return error_info(exc) == info


def rebuild_error(info: ErrorInfo) -> BaseException:
    """An exception of the recorded class with the recorded message (see the module docs)."""
    cls = _resolve(info.type)
    if cls is not None and issubclass(cls, Exception):
        built = _built(cls, info)
        if built is not None:
            return built
    return _stand_in(info)(info)


def stand_in_reason(info: ErrorInfo) -> str:
    """Why :func:`rebuild_error` raised a stand-in for ``info`` (for the report)."""
    cls = _resolve(info.type)
    if cls is None:
        return f"{info.type} is not imported by the replayed program"
    if not issubclass(cls, Exception):
        return f"{info.type} is not an Exception"
    return f"{info.type} could not be built from the recorded arguments"


def is_timeout_info(info: ErrorInfo | None) -> bool:
    return info is not None and ("Timeout" in info.type or info.type == "TimeoutError")
