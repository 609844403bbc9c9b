"""Which environment variables a run reads: the manifest records those, never the whole
environment.

:func:`track_env_reads` swaps the class of ``os.environ`` for a subclass that notes every
name looked up one at a time (``os.environ[name]``, ``os.environ.get``, ``os.getenv``,
``name in os.environ``), into the ``env_reads`` of the run whose context reads it (the swap
is made once for all the runs of the process; a read outside any run is not noted).
Copying or iterating the whole environment (``os.environ.copy()``, ``.items()``, what HTTP
clients do to find proxy settings) is not a read of every variable and is not noted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, ItemsView, ValuesView

from sandbox.capture.shared import Shared
from sandbox.seam import boundary


class _TrackedEnviron(os._Environ[str]):
    def __getitem__(self, key: str) -> str:
        reads: set[str] | None = getattr(boundary.current(), "env_reads", None)
        if reads is not None:
            reads.add(key)
        return super().__getitem__(key)

    def _plain(self) -> dict[str, str]:
        data: dict[str, str] = self._data  # type: ignore[attr-defined]
        return {self.decodekey(k): self.decodevalue(v) for k, v in data.items()}

    def copy(self) -> dict[str, str]:
        return self._plain()

    def items(self) -> ItemsView[str, str]:
        return self._plain().items()

    def values(self) -> ValuesView[str]:
        return self._plain().values()


def _track() -> Callable[[], None]:
    environ = os.environ
    original = type(environ)
    environ.__class__ = _TrackedEnviron

    def undo() -> None:
        environ.__class__ = original

    return undo


_TRACKING = Shared(_track)


def track_env_reads() -> Callable[[], None]:
    """Note the variables read through ``os.environ`` into the current run's ``env_reads``
    from now on; return the function that stops it (for this holder)."""
    return _TRACKING.acquire()
