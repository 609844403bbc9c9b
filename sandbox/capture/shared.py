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

Undo = Callable[[], None]

_lock = threading.RLock()  # installing a patch may import, and so patch, another module


class Shared:
    """One process-wide patch, installed while anyone holds it."""

    def __init__(self, install: Callable[[], Undo]) -> None:
        self._install = install
        self._undo: Undo | None = None
        self.holders = 0

    def acquire(self) -> Undo:
        """Hold the patch (installing it for the first holder); return the release, which
        undoes it when the last holder releases (calling it twice releases once)."""
        with _lock:
            if self.holders == 0:
                self._undo = self._install()
            self.holders += 1
        released = False

        def release() -> None:
            nonlocal released
            with _lock:
                if released:
                    return
                released = True
                self.holders -= 1
                if self.holders == 0 and self._undo is not None:
                    undo, self._undo = self._undo, None
                    undo()

        return release
