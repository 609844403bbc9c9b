"""Which environment variables a run reads: the manifest records those, never the whole
environment.

:func:`track_env_reads` swaps the class of ``os.environ`` for a subclass that notes every
name looked up one at a time (``os.environ[name]``, ``os.environ.get``, ``os.getenv``,
``name in os.environ``). Copying or iterating the whole environment (``os.environ.copy()``,
``.items()``, what HTTP clients do to find proxy settings) is not a read of every variable
and is not noted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, ItemsView, ValuesView


class _TrackedEnviron(os._Environ[str]):
    reads: set[str] = set()

    def __getitem__(self, key: str) -> str:
        _TrackedEnviron.reads.add(key)
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


def track_env_reads() -> tuple[set[str], Callable[[], None]]:
    """Start noting the variables read through ``os.environ``; return the (live) set of
    names and the function that stops it."""
    environ = os.environ
    original = type(environ)
    reads: set[str] = set()
    _TrackedEnviron.reads = reads
    environ.__class__ = _TrackedEnviron

    def undo() -> None:
        environ.__class__ = original

    return reads, undo
