"""Which environment variables a run reads: the manifest records those, never the whole
environment.

:func:`track_env_reads` swaps the class of ``os.environ`` for a subclass that notes every
name looked up one at a time (``os.environ[name]``, ``os.environ.get``, ``os.getenv``,
``name in os.environ``), into the ``env_reads`` of the run whose context reads it (the swap
is made once for all the runs of the process). Copying or iterating the whole environment
(``os.environ.copy()``, ``.items()``, what HTTP clients do to find proxy settings) is not a
read of every variable and is not noted.

An ASGI application's lifespan (where FastAPI apps make their pools and clients) is the
program starting too: the middleware runs it in :func:`starting`, whose reads count alike.

Settings are often read before a run starts: a script reads ``os.environ["AGENT_MODEL"]``
at import, then opens ``capture.run``. :func:`track_from_import` (called when
:mod:`sandbox.capture` is imported) notes the names read while no run is open by the agent's
program as it starts (its module-level code, and what that calls: ``OpenAI()`` reads the API
key), not by the sandbox or by a library as it is imported (whose code it is: as
:mod:`sandbox.capture.entropy` tells), and every run started afterwards counts them among its
reads. A test's ``monkeypatch.setenv`` (which reads the value it will restore) is not at
module level, so not noted.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from collections.abc import Callable, ItemsView, Iterator, ValuesView
from typing import Any

from sandbox.capture.origin import IMPORTING, origin
from sandbox.capture.shared import Shared
from sandbox.seam import boundary

_lock = threading.Lock()
_outside: set[str] | None = None
"""The names the agent's program read outside any run (``None`` until
:func:`track_from_import`)."""
_original: type[os._Environ[str]] | None = None


_LATER_SITES = 4096
"""How many (name, reading code) pairs read outside any run but not as the program started
are remembered (:func:`_note`); past it, they are forgotten and learned again."""
_later: set[tuple[str, Any]] = set()


_starting: contextvars.ContextVar[bool] = contextvars.ContextVar("sandbox_starting", default=False)
"""Whether this context is the agent's program starting (see :func:`starting`)."""


def _note(key: str) -> None:
    reads: set[str] | None = getattr(boundary.current(), "env_reads", None)
    if reads is not None:
        if key not in reads and not _read_by_the_sandbox():  # a name noted once: no walk
            reads.add(key)
    elif _outside is not None and key not in _outside:
        if _starting.get():
            if not _read_by_the_sandbox():
                _outside.add(key)
        else:
            _note_outside(key, _outside)


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """The block (and the tasks it starts) is the agent's program starting, as its imports
    are: an ASGI application's lifespan, which makes its clients from its settings. The
    names it reads outside any run count among the reads of the runs started later."""
    token = _starting.set(True)
    try:
        yield
    finally:
        _starting.reset(token)


def _note_outside(key: str, outside: set[str]) -> None:
    """A read outside any run: noted when the agent's program reads it as it starts. A
    name read by code that read it once already when the program was not starting (a
    framework reading a setting at every request: ``OTEL_...`` on each ASGI call) is
    not looked at again: the whole stack would be walked at each read. (So a name that
    code reads first while the program serves, and later under a module's top level, an
    agent module imported outside any run after serving began, is not noted; read within
    a run, it is that run's.)"""
    reader = _reader()
    site = (key, None if reader is None else reader.f_code)
    if site in _later:
        return
    if _read_by_the_agent(reader):
        outside.add(key)
        return
    if len(_later) >= _LATER_SITES:
        _later.clear()
    _later.add(site)


def _reader() -> Any:
    """The frame that read: the first one outside this module and the standard library."""
    frame: Any = sys._getframe(1)
    while frame is not None and (
        frame.f_globals.get("__name__") == __name__ or origin(frame) == "stdlib"
    ):
        frame = frame.f_back
    return frame


def _read_by_the_sandbox() -> bool:
    """Whether the sandbox's own code read it (the capture copying the environment as a run
    starts): not a read of the run's."""
    frame = _reader()
    return frame is not None and origin(frame) == "sandbox"


def _read_by_the_agent(frame: Any) -> bool:
    """Whether the agent's program read it (``frame``: the :func:`_reader`) as it started: a
    module-level frame of the agent's own code is on the stack (its settings, or a client it
    builds at import), and the read is not the sandbox's nor an installed library's as that
    library is imported."""
    if frame is None or origin(frame) == "sandbox":
        return False
    while frame is not None:
        if frame.f_code.co_filename.startswith(IMPORTING):
            return False  # a library read it as it was imported
        if frame.f_code.co_name == "<module>" and origin(frame) == "agent":
            return True
        frame = frame.f_back
    return False


_writes = [0]
"""How many writes went through ``os.environ`` while it was tracked (each counted once
it is made)."""
_decoded: tuple[int, dict[str, str]] | None = None
"""The environment decoded (every run's start copies it), with the count of writes it
holds."""


class _TrackedEnviron(os._Environ[str]):
    def __getitem__(self, key: str) -> str:
        _note(key)
        return super().__getitem__(key)

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        _writes[0] += 1

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        _writes[0] += 1

    def _plain(self) -> dict[str, str]:
        """The environment as a new dict, decoded once until a write changes it."""
        global _decoded
        writes, known = _writes[0], _decoded
        if known is not None and known[0] == writes:
            return dict(known[1])
        data: dict[str, str] = self._data  # type: ignore[attr-defined]
        plain = {self.decodekey(k): self.decodevalue(v) for k, v in data.items()}
        if _writes[0] == writes:  # no write while it was decoded
            _decoded = (writes, plain)
        return dict(plain)

    def copy(self) -> dict[str, str]:
        return self._plain()

    def items(self) -> ItemsView[str, str]:
        return self._plain().items()

    def values(self) -> ValuesView[str]:
        return self._plain().values()


def _swap_in() -> None:
    global _original, _decoded
    environ = os.environ
    if not isinstance(environ, _TrackedEnviron):
        _original = type(environ)
        _decoded = None  # writes made untracked were not counted
        environ.__class__ = _TrackedEnviron


def _track() -> Callable[[], None]:
    with _lock:
        _swap_in()

    def undo() -> None:
        global _original
        with _lock:
            if _original is not None and _outside is None:
                os.environ.__class__ = _original
                _original = None

    return undo


_TRACKING = Shared(_track)


def track_from_import() -> None:
    """Note the names read while no run is open, from now on, for the runs started later
    (idempotent; fails open: an environment that is not ``os._Environ`` is left alone)."""
    global _outside
    with _lock:
        if _outside is not None or type(os.environ) is not os._Environ:
            return
        _outside = set()
        _swap_in()


def read_before_runs() -> set[str]:
    """The names the agent's program read outside any run since :func:`track_from_import`
    (each run started afterwards counts them among its reads)."""
    return set(_outside or ())


def track_env_reads() -> Callable[[], None]:
    """Note the variables read through ``os.environ`` into the current run's ``env_reads``
    from now on; return the function that stops it (for this holder)."""
    return _TRACKING.acquire()
