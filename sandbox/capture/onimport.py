"""Patch a module when the agent imports it, not before: importing a library ourselves would
cost every run its import time and run its import-time code (ids drawn, files read) inside
the capture or the replay.

``when_imported({"psycopg": patch})`` calls ``patch(module)`` at once for a module already
imported, and right after the module's own code has run for one imported later; the returned
function stops watching (undoing the patches is the caller's business). :func:`class_patches`
does both for the patches a client's module gets, held once for every run.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from sandbox.capture.shared import Shared

Patch = Callable[[ModuleType], None]
Originals = list[tuple[type, str, Any]]
"""``(class, attribute, original)`` of each attribute a patch replaced."""


class _Watcher(importlib.abc.MetaPathFinder):
    def __init__(self, patches: Mapping[str, Patch]) -> None:
        self.patches = dict(patches)
        self.active = True

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patch = self.patches.get(fullname)
        if patch is None or not self.active:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader: Any = spec.loader
        run = loader.exec_module
        watcher = self

        def exec_module(module: ModuleType) -> None:
            run(module)
            if watcher.active:
                patch(module)

        loader.exec_module = exec_module
        return spec


_lock = threading.Lock()


def when_imported(patches: Mapping[str, Patch]) -> Callable[[], None]:
    """See the module documentation."""
    watcher = _Watcher(patches)
    with _lock:
        for name, patch in patches.items():
            module = sys.modules.get(name)
            if module is not None:
                patch(module)
        sys.meta_path.insert(0, watcher)

    def stop() -> None:
        watcher.active = False
        with _lock, contextlib.suppress(ValueError):
            sys.meta_path.remove(watcher)

    return stop


def class_patches(module: str, patch: Callable[[ModuleType, Originals], None]) -> Shared:
    """``patch(module, originals)`` when the agent imports ``module`` (at once if it has),
    held once for every holder: ``patch`` appends what it replaced to ``originals``, put
    back, last first, when the last holder lets go."""

    def install() -> Callable[[], None]:
        originals: Originals = []
        stop = when_imported({module: lambda found: patch(found, originals)})

        def undo() -> None:
            stop()
            for cls, attr, original in reversed(originals):
                setattr(cls, attr, original)
            originals.clear()

        return undo

    return Shared(install)
