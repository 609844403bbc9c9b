"""The contract between a service kind's client hooks and the capture: a connection the
agent opens (:class:`Connect`), the router that says where it really goes (the same place at
capture, the sandbox's service on replay), and a kind's :class:`ClientHook` (named in the
``sandbox_replayer.clients`` entry-point group by the kind's package). The capture installs
the hooks (:mod:`sandbox.capture.clients`); a kind's package writes its hook against this
module alone, below the capture.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Connect:
    """A connection the agent opens."""

    kind: str
    """The service kind: ``postgres``, ``redis`` or ``sqlite``."""
    client: str
    """The client library: ``psycopg``, ``psycopg2``, ``asyncpg``, ``redis``, ``sqlite3``."""
    endpoint: str
    """A URL (credentials included) or an absolute path."""
    given: str | None = None
    """The DSN, URL or path exactly as the agent passed it, when it passed one."""


Router = Callable[[Connect], str]
ClientPatch = Callable[[Router, list[Callable[[], None]]], None]
"""Patch a client library so that its connections go through the router (each change it
makes is undone by a function it appends to the list)."""


@dataclass(frozen=True)
class ClientHook:
    """How a service kind's clients are seen connecting, named in the
    ``sandbox_replayer.clients`` entry-point group (:mod:`sandbox.plugins`) by the kind's
    package: ``patch`` is applied when the agent imports ``module``."""

    module: str
    patch: ClientPatch
    kind: str
    default_port: int | None = None
    """The kind's port when an endpoint names none."""
    default_path: str = ""
    """The path an endpoint that names none means (redis: database ``0``)."""
    frozen_now: Callable[[], Callable[[], None]] | None = None
    """Under the replay's frozen clock, make the client's own idea of now (a database's
    ``'now'``) read ``time.time()``, which the clock freezes; returns the undo."""


_state = threading.local()


@contextlib.contextmanager
def unseen() -> Iterator[None]:
    """Connections opened in the block (by the sandbox itself) are not routed."""
    before = getattr(_state, "inside", False)
    _state.inside = True
    try:
        yield
    finally:
        _state.inside = before


def route(router: Router, connect: Connect) -> str:
    """Route a connection (for a :class:`ClientHook`'s patch): the router's endpoint for
    it; a connection the sandbox itself opens (in :func:`unseen`) goes where it was sent."""
    if getattr(_state, "inside", False):
        return connect.endpoint
    with unseen():
        return router(connect)


class OncePerRun:
    """What each run (its boundary) was made to see already, once each: a connection or an
    address a hook routes for the run in context on first use (one it did not open itself,
    from a client or pool shared among runs). Forgotten with the run."""

    def __init__(self) -> None:
        self._seen: weakref.WeakKeyDictionary[Any, set[Hashable]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def first(self, run: Any, key: Hashable) -> bool:
        """Whether ``run`` meets ``key`` for the first time (noted from now on)."""
        with self._lock:
            seen = self._seen.setdefault(run, set())
            if key in seen:
                return False
            seen.add(key)
            return True

    def forget(self, run: Any, key: Hashable) -> None:
        """``run`` is to meet ``key`` afresh (its routing was refused)."""
        with self._lock:
            self._seen.get(run, set()).discard(key)


def answered(run: Any, service: str) -> None:
    """A command ``run`` (a boundary, or ``None``) sent to a ``service`` (``"Redis"``) through
    a client was answered. Only a replay counts them (its ``answered``): a run that made none
    of its recorded calls but read or wrote the restored state exercised it
    (:mod:`sandbox.replay.judging.coverage`). For a client whose connections send nothing of
    their own through the same call."""
    if getattr(run, "replaying", False):
        run.answered(service)


def instances_of(cls: type) -> list[Any]:
    """The objects of ``cls`` (or a subclass) the garbage collector tracks now: a scan of
    them all. Each is asked its type with ``type()``, not ``isinstance`` (which would ask a
    dead weak proxy for its class, and raise)."""
    return [o for o in gc.get_objects() if issubclass(type(o), cls)]


def patch_attribute(
    owner: Any, attr: str, make: Callable[[Any], Any], undo: list[Callable[[], None]]
) -> None:
    """Replace ``owner.attr`` (as stored: a classmethod stays one) by ``make(original)``."""
    original = vars(owner)[attr] if attr in vars(owner) else getattr(owner, attr)
    setattr(owner, attr, make(original))
    undo.append(lambda: setattr(owner, attr, original))
