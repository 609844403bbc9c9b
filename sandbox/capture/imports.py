"""Patches that wait for their library: applied when a module is imported (at once when it
is already), undone when the last capture or replay that wanted them ends.

Integrations with third-party libraries (the MCP SDK, agent frameworks) use this, so that a
run that never imports a library never pays for importing it, and one that imports it after
the capture started is still captured. The post-import hook is wrapt's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

Undo = Callable[[], None]


def undo_all(undos: list[Undo]) -> Undo:
    """One undo for several: runs each, last first."""

    def undo() -> None:
        for stop in reversed(undos):
            stop()

    return undo


class ImportPatch:
    """``apply`` (which returns its undo) runs once ``module`` is imported while at least
    one :meth:`start` is not undone. Starts nest (counted)."""

    def __init__(self, module: str, apply: Callable[[], Undo]) -> None:
        self.module = module
        self._apply = apply
        self._lock = threading.RLock()
        self._count = 0
        self._hooked = False
        self._undo: Undo | None = None

    @property
    def applied(self) -> bool:
        return self._undo is not None

    def _on_import(self, _module: object) -> None:
        with self._lock:
            if self._count > 0 and self._undo is None:
                self._undo = self._apply()

    def start(self) -> Undo:
        """Want the patch from now on; return the function that stops wanting it."""
        import wrapt

        with self._lock:
            self._count += 1
            if self._count == 1:
                if not self._hooked:
                    self._hooked = True  # runs the hook now when the module is loaded
                    wrapt.register_post_import_hook(self._on_import, self.module)
                elif self.module in sys.modules:
                    self._on_import(sys.modules[self.module])
        done = False

        def stop() -> None:
            nonlocal done
            with self._lock:
                if done:
                    return
                done = True
                self._count -= 1
                if self._count == 0 and self._undo is not None:
                    undo, self._undo = self._undo, None
                    undo()

        return stop
