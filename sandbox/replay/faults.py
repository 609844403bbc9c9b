"""Faults from the recording, raised again on replay.

A recorded error is data (:class:`~sandbox.snapshot.events.ErrorInfo`: a qualified type name
and a message). :func:`rebuild_error` turns it back into an exception the agent's code can
catch as it did at capture: the original class when it is already imported in this process
(``httpx.ReadTimeout``, ``TimeoutError``), else a :class:`RecordedError` subclass of that name
which is also a :class:`TimeoutError` when the name says ``Timeout``. A module named by a
snapshot is never imported: a bundle is untrusted data.
"""

from __future__ import annotations

import sys

from sandbox.seam.boundary import RecordedError
from sandbox.snapshot.events import ErrorInfo

_BUILTINS = sys.modules["builtins"]


def _resolve(qualified: str) -> type[BaseException] | None:
    """The already-imported exception class named ``module.QualName`` (or a builtin name)."""
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
        if isinstance(found, type) and issubclass(found, BaseException):
            return found
    return None


def _stand_in(info: ErrorInfo) -> type[RecordedError]:
    name = info.type.rsplit(".", 1)[-1] or "RecordedError"
    bases: tuple[type, ...] = (RecordedError,)
    if "Timeout" in info.type:
        bases = (RecordedError, TimeoutError)
    return type(name, bases, {"__module__": "sandbox.replay.recorded"})


def rebuild_error(info: ErrorInfo) -> BaseException:
    """An exception of the recorded type with the recorded message (see the module docs)."""
    cls = _resolve(info.type)
    if cls is not None and issubclass(cls, Exception):
        try:
            return cls(info.message)
        except Exception:  # a constructor that wants more than a message
            pass
    return _stand_in(info)(info)


def is_timeout_info(info: ErrorInfo | None) -> bool:
    return info is not None and ("Timeout" in info.type or info.type == "TimeoutError")
