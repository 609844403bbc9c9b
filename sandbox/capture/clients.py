"""The database clients, seen where they connect: services are found, not declared.

:func:`install` applies the client hooks of the ``sandbox_replayer.clients`` entry-point
group (each kind's package names its own, :class:`~sandbox.seam.clients.ClientHook`), each
when the agent imports its client. Each connection is handed to a *router* as a
:class:`Connect` (the kind, the client, the endpoint the agent asked for, credentials
included, in memory only); the router returns the endpoint to really connect to: the same
one at capture (:mod:`sandbox.capture.discovery`), the sandbox's on replay
(:mod:`sandbox.replay.isolation.redirect`), or raises to refuse. Connections made by the router
itself (capturing a service's state) pass through unseen.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from urllib.parse import urlsplit

from sandbox.capture.onimport import Patch, when_imported
from sandbox.seam.clients import (
    ClientHook,
    ClientPatch,
    Connect,
    Router,
    patch_attribute,
    route,
    unseen,
)

_LOOPBACK = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "[::1]": "127.0.0.1"}


_hooks_lock = threading.Lock()
_hooks: list[ClientHook] | None = None


def client_hooks() -> list[ClientHook]:
    """The hooks of the entry-point group, loaded once; one that cannot be loaded is left
    out with a warning (capture fails open)."""
    global _hooks
    with _hooks_lock:
        if _hooks is None:
            from sandbox.plugins import CLIENTS_GROUP, plugin_entry_points

            found: list[ClientHook] = []
            for point in plugin_entry_points(CLIENTS_GROUP):
                try:
                    hook = point.load()
                except Exception as exc:
                    warnings.warn(
                        f"client hook {point.name!r} ({point.value}) cannot be loaded: {exc}",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    continue
                if isinstance(hook, ClientHook):
                    found.append(hook)
            _hooks = found
        return _hooks


def _defaults(kind: str) -> tuple[int, str]:
    """The port and path an endpoint of ``kind`` means when it names none, from the kind's
    client hooks."""
    for hook in client_hooks():
        if hook.kind == kind and hook.default_port is not None:
            return hook.default_port, hook.default_path
    return 0, ""


def endpoint_key(kind: str, endpoint: str) -> str:
    """The identity of a service endpoint, without credentials: ``postgres://127.0.0.1:5432/app``,
    ``redis://127.0.0.1:6379/0``, or a resolved path."""
    if "://" not in endpoint:
        return os.path.realpath(endpoint)
    return _url_key(kind, endpoint)


@functools.lru_cache(maxsize=256)
def _url_key(kind: str, endpoint: str) -> str:
    """:func:`endpoint_key` of a URL (remembered: a run's clients name the same few on
    every call)."""
    default_port, default_path = _defaults(kind)
    parts = urlsplit(endpoint)
    host = (parts.hostname or "localhost").lower()
    host = _LOOPBACK.get(host, host)
    try:
        port = parts.port or default_port
    except ValueError:
        port = 0
    path = parts.path.strip("/") or default_path
    return f"{kind}://{host}:{port}/{path}"


def address_of(kind: str, endpoint: str) -> str:
    """``host:port`` of a server endpoint, the path of a file one (for messages and policies)."""
    if "://" not in endpoint:
        return endpoint
    key = endpoint_key(kind, endpoint)
    return key.split("://", 1)[1].split("/", 1)[0]


_lock = threading.RLock()  # a patch may import (and so patch) another client


def install(router: Router) -> Callable[[], None]:
    """Route every connection of the clients through ``router``, patching each client when
    it is imported (at once if it is already); return the undo function."""
    undo: list[Callable[[], None]] = []

    def patcher(name: str, patch: Callable[[Router, list[Callable[[], None]]], None]) -> Patch:
        def apply(_module: ModuleType) -> None:
            with _lock:
                try:
                    patch(router, undo)
                except Exception as exc:  # the agent's import goes on (capture fails open)
                    warnings.warn(
                        f"client hook for {name!r} cannot be applied, its connections are "
                        f"not seen: {exc}",
                        RuntimeWarning,
                        stacklevel=2,
                    )

        return apply

    patches = {hook.module: hook.patch for hook in client_hooks()}
    stop = when_imported({name: patcher(name, patch) for name, patch in patches.items()})

    def restore() -> None:
        stop()
        with _lock:
            for step in reversed(undo):
                step()
            undo.clear()

    return restore


__all__ = [
    "ClientHook",
    "ClientPatch",
    "Connect",
    "Router",
    "address_of",
    "client_hooks",
    "endpoint_key",
    "install",
    "patch_attribute",
    "route",
    "unseen",
]
