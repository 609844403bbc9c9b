"""Process-wide patches shared by every run of a process.

Many runs record at once in one process (each ``capture.run`` in its own context), but a
function is patched once: :class:`Shared` installs its patch when the first run that needs
it starts and undoes it when the last one ends (counted). A patched function never holds a
run in a closure: it finds the run it serves by its context
(:func:`sandbox.seam.boundary.current`), and does nothing extra outside any run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

Undo = Callable[[], None]
T = TypeVar("T")

_lock = threading.RLock()  # installing a patch may import, and so patch, another module


class Counted:
    """A patch held by a count of holders (:class:`Shared`,
    :class:`~sandbox.capture.imports.ImportPatch`): undone when the last one lets go."""

    def __init__(self) -> None:
        self.holders = 0
        self._undo: Undo | None = None

    def let_go(self) -> None:
        """Count one holder less (under the lock its :class:`Release` was given)."""
        self.holders -= 1
        if self.holders == 0 and self._undo is not None:
            undo, self._undo = self._undo, None
            undo()


class Release:
    """The release of one hold of a :class:`Counted` patch: calls ``owner.let_go()`` under
    ``lock`` on its first call only. One object, not a closure and its cells: a run holds
    several for its whole life, and what a run keeps alive is what the collector scans."""

    __slots__ = ("_done", "_lock", "_owner")

    def __init__(self, owner: Counted, lock: AbstractContextManager[object]) -> None:
        self._owner = owner
        self._lock = lock
        self._done = False

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            self._owner.let_go()


class Shared(Counted):
    """One process-wide patch, installed while anyone holds it."""

    def __init__(self, install: Callable[[], Undo]) -> None:
        super().__init__()
        self._install = install

    def acquire(self) -> Undo:
        """Hold the patch (installing it for the first holder); return the release, which
        undoes it when the last holder releases (calling it twice releases once)."""
        with _lock:
            if self.holders == 0:
                self._undo = self._install()
            self.holders += 1
        return Release(self, _lock)

    def acquire_for(
        self, registry: dict[int, T], owner: int, value: T, close: Undo | None = None
    ) -> Undo:
        """:meth:`acquire` for a run (``owner``: its boundary's ``id``) that ``value``
        serves, registered in ``registry`` until the returned undo, which also releases the
        patch and then calls ``close``."""
        registry[owner] = value
        return Registered(registry, owner, value, self.acquire(), close)


class Registered(Generic[T]):
    """The undo of :meth:`Shared.acquire_for`. One object, not a closure and its cells: a
    run holds it for its whole life, and what a run keeps alive is what the collector
    scans."""

    __slots__ = ("close", "owner", "registry", "release", "value")

    def __init__(
        self, registry: dict[int, T], owner: int, value: T, release: Undo, close: Undo | None
    ) -> None:
        self.registry, self.owner, self.value = registry, owner, value
        self.release, self.close = release, close

    def __call__(self) -> None:
        if self.registry.get(self.owner) is self.value:
            del self.registry[self.owner]
        self.release()
        if self.close is not None:
            self.close()
