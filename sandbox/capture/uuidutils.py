"""Ids from ``uuid_utils``, the compiled (Rust) ``uuid`` that LangChain and LangSmith draw
their run and message ids from (``langchain_core.utils.uuid.uuid7``, through
``uuid_utils.compat``): its draws never reach ``os.urandom`` or Python's clock, so the
process's entropy (:mod:`sandbox.capture.entropy`) does not see them.

While a run records, each of ``uuid_utils``' drawing functions (``uuid1``, ``uuid4``,
``uuid6``, ``uuid7`` and the ``_uuid4_int``/``_uuid7_int`` that ``uuid_utils.compat`` draws
with) crosses the seam as a ``random`` event named ``uuid_utils.uuidN`` holding the id it
returned (the real one: nothing is made predictable); replay hands the recorded id back, in
the type the function returns. The deterministic ones (``uuid3``, ``uuid5``, ``uuid8``) are
left alone. As for ``uuid.uuid4``, a draw outside any run, by the sandbox, or by a library
while it is being imported is not the run's (:func:`sandbox.capture.entropy.not_the_runs`).

The patch waits for the program to import ``uuid_utils`` (nothing here imports it). A module
that bound one of the functions before the patch (``uuid_utils.compat`` does, and so does a
program's ``from uuid_utils import uuid7`` run before ``capture.run`` started) is rebound to
the patched one while the patch holds (:mod:`sandbox.capture.rebind`).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sandbox.capture.entropy import not_the_runs
from sandbox.capture.imports import ImportPatch, Undo
from sandbox.capture.rebind import Rebinder
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome
from sandbox.snapshot.events import Event, RandomDraw

MODULE = "uuid_utils"
DRAWS = {
    "uuid1": "uuid1",
    "uuid4": "uuid4",
    "uuid6": "uuid6",
    "uuid7": "uuid7",
    "_uuid4_int": "uuid4",
    "_uuid7_int": "uuid7",
}
"""The drawing functions of ``uuid_utils``, by the id each draws (the event's name)."""


class IdAdapter:
    """Records the id a draw returned (its canonical text); replay hands it back as ``make``
    builds it (an ``int`` for ``_uuidN_int``, else ``uuid_utils.UUID``)."""

    def __init__(self, make: Callable[[str], Any]) -> None:
        self.make = make

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        if outcome.error is not None:
            raise outcome.error
        value = outcome.value
        text = str(uuid.UUID(int=value)) if isinstance(value, int) else str(value)
        emitter.emit(RandomDraw, call, source=call.name, value=text)
        return value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, RandomDraw)
        return self.make(str(event.value))


def _wrap(name: str, original: Callable[..., Any], make: Callable[[str], Any]) -> Any:
    event = f"{MODULE}.{DRAWS[name]}"
    adapter = IdAdapter(make)

    def draw(*args: Any, **kwargs: Any) -> Any:
        if boundary.current() is None or not_the_runs():
            return original(*args, **kwargs)
        return boundary.through("random", event, None, lambda: original(*args, **kwargs), adapter)

    draw.__name__ = draw.__qualname__ = getattr(original, "__name__", name)
    draw.__doc__ = getattr(original, "__doc__", None)
    draw.__wrapped__ = original  # type: ignore[attr-defined]
    return draw


_REBINDER = Rebinder()


def _apply() -> Undo:
    module: ModuleType = sys.modules[MODULE]
    make_uuid: Callable[[str], Any] = module.UUID
    patched: dict[Any, Any] = {}
    for name in DRAWS:
        original = getattr(module, name, None)
        if original is not None:
            make = _int_of if name.endswith("_int") else make_uuid
            patched[original] = _wrap(name, original, make)
    return _REBINDER.rebind(patched)  # uuid_utils' own names, compat's, and the program's


def _int_of(text: str) -> int:
    return uuid.UUID(text).int


PATCH = ImportPatch(MODULE, _apply)


def patch_uuid_utils() -> Undo:
    """Record ``uuid_utils``' draws in every run of the process (once it is imported);
    return the function that stops wanting it."""
    return PATCH.start()
