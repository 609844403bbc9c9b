"""Rebind what the modules loaded hold of a function a patch replaces.

A patch that swaps a module's attribute (``uuid.uuid4``) misses the modules that bound the
function before it (``from uuid import uuid4``, run as they were imported). Which modules
those are depends on when the patch came: a capture that starts inside the program
(``capture.run``) comes after its imports, the replay of that program (and ``sandbox capture
-- CMD``) before them. Rebinding those names makes a patch cover the function however it is
held, so the capture and its replay draw through the same patch (the same events) whatever
the import order.

Each module is looked through once per :class:`Rebinder` (a module loaded later is looked
through when the patch next applies), so a process pays for the modules it has loaded once,
not per run. Only module globals are rebound: a reference kept elsewhere (a class attribute,
a default argument, a closure) keeps the original.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

Undo = Callable[[], None]


class Rebinder:
    """Finds, and rebinds, the module globals holding one patch's originals."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._found: list[tuple[dict[str, Any], str]] = []
        self._lock = threading.Lock()
        self._loaded: tuple[int, str] | None = None
        """``sys.modules`` as last looked through: its size and its newest module."""

    def _holders(self, originals: frozenset[int]) -> list[tuple[dict[str, Any], str]]:
        loaded = (len(sys.modules), next(reversed(sys.modules), ""))
        if loaded == self._loaded:  # no module loaded since: nothing new to look through
            return list(self._found)
        self._loaded = loaded
        for module in list(sys.modules.values()):
            if id(module) in self._seen:
                continue
            self._seen.add(id(module))
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict) or originals.isdisjoint(map(id, names.values())):
                continue
            self._found += [(names, key) for key, v in list(names.items()) if id(v) in originals]
        return list(self._found)

    def rebind(self, patched: Mapping[Any, Any]) -> Undo:
        """Point every module global holding a key of ``patched`` (an original) at its value
        (the patched function); return the function that points back those still patched."""
        by_id = {id(original): (original, new) for original, new in patched.items()}
        done: list[tuple[dict[str, Any], str, Any, Any]] = []
        with self._lock:
            for names, key in self._holders(frozenset(by_id)):
                held = names.get(key)
                if held is not None and id(held) in by_id:
                    original, new = by_id[id(held)]
                    names[key] = new
                    done.append((names, key, original, new))

        def undo() -> None:
            for names, key, original, new in done:
                if names.get(key) is new:
                    names[key] = original

        return undo
