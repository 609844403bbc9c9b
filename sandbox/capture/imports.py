"""Patches that wait for their library: applied when a module is imported (at once when it
is already), undone when the last capture or replay that wanted them ends.

Integrations with third-party libraries (the MCP SDK, agent frameworks) use this, so that a
run that never imports a library never pays for importing it, and one that imports it after
the capture started is still captured. The post-import hook is wrapt's. A patch that cannot
apply (a version of the library it does not know) never breaks the import: one stderr line
names the package and its version.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
from collections.abc import Callable

from sandbox.capture.shared import Counted, Release

Undo = Callable[[], None]


def unsupported(module: str, exc: BaseException) -> None:
    """Say on stderr, in one line naming the package and its version, that a patch could
    not apply to ``module`` (a version the integration does not know): its calls are not
    recorded, and the program goes on."""
    top = module.partition(".")[0]
    package = (importlib.metadata.packages_distributions().get(top) or [top])[0]
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "(unknown version)"
    reason = (str(exc).splitlines() or [""])[0]
    sys.stderr.write(
        f"sandbox: {package} {version} is not supported: its calls are not captured"
        f" ({type(exc).__name__}: {reason})\n"
    )


def undo_all(undos: list[Undo]) -> Undo:
    """One undo for several: runs each, last first."""

    def undo() -> None:
        for stop in reversed(undos):
            stop()

    return undo


class ImportPatch(Counted):
    """``apply`` (which returns its undo) runs once ``module`` is imported while at least
    one :meth:`start` is not undone. Starts nest (counted)."""

    def __init__(self, module: str, apply: Callable[[], Undo]) -> None:
        super().__init__()
        self.module = module
        self._apply = apply
        self._lock = threading.RLock()
        self._hooked = False
        self._failed = False
        """The patch could not apply (said once: see :func:`unsupported`)."""

    @property
    def applied(self) -> bool:
        return self._undo is not None

    def _on_import(self, _module: object) -> None:
        with self._lock:
            if self.holders > 0 and self._undo is None and not self._failed:
                try:
                    self._undo = self._apply()
                except Exception as exc:  # fails open: the library is named, not broken
                    self._failed = True
                    unsupported(self.module, exc)

    def start(self) -> Undo:
        """Want the patch from now on; return the function that stops wanting it."""
        import wrapt

        with self._lock:
            self.holders += 1
            if self.holders == 1:
                if not self._hooked:
                    self._hooked = True  # runs the hook now when the module is loaded
                    wrapt.register_post_import_hook(self._on_import, self.module)
                elif self.module in sys.modules:
                    self._on_import(sys.modules[self.module])
        return Release(self, self._lock)
