"""Service kinds by name: those named in the ``sandbox_replayer.services`` entry-point group
(the built-in ones included, see :mod:`sandbox.plugins`), loaded on first look-up, and any
other a caller registers with :func:`sandbox.services.base.register`."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from sandbox.errors import ServiceError, UnknownNameError
from sandbox.plugins import SERVICES_GROUP, plugin_entry_points
from sandbox.services.base import ServiceKind, register, registered

_loaded = False
_lock = threading.Lock()


def load_kinds() -> None:
    """Load and register every kind of the entry-point group (once)."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for point in plugin_entry_points(SERVICES_GROUP):
            try:
                kind = point.load()
            except Exception as exc:  # a broken plugin: say which, and what
                raise ServiceError(
                    f"service kind {point.name!r} ({point.value}) cannot be loaded: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            if getattr(kind, "name", None) != point.name:
                raise ServiceError(
                    f"entry point {point.name!r} ({point.value}) is not a service kind named "
                    f"{point.name!r}"
                )
            register(kind)
        _loaded = True


def get_kind(name: str) -> ServiceKind:
    load_kinds()
    try:
        return registered()[name]
    except KeyError:
        raise UnknownNameError("service kind", name, list(registered())) from None


def kinds() -> Mapping[str, ServiceKind]:
    """Every registered kind by name, the built-in ones included."""
    load_kinds()
    return registered()


def kind_names() -> list[str]:
    load_kinds()
    return sorted(registered())
