"""The process's entropy: what ``os.urandom`` returns, and the seeds of generators made
without one, cross the seam, so replay hands back the bytes the run got.

* ``os.urandom`` (and ``random``'s own reference to it, which ``random.SystemRandom`` and so
  ``secrets`` draw from) is wrapped: each call is a ``random`` event named ``os.urandom``
  holding the bytes it returned. The bytes are the real ones: nothing is made predictable
  while capturing. ``secrets.token_hex``, ``numpy.random.default_rng()`` (whose seed comes
  from ``secrets``), ``uuid.uuid4`` in a run that does not seed its ids all draw through it.
* ``random.Random.seed(None)`` (what ``random.Random()`` does) seeds from 32 bytes of that
  wrapped ``os.urandom``, instead of from the C library's own entropy, so an unseeded
  generator draws the same numbers on replay.

Draws made by the sandbox's own code (a temporary file name for an atomic write) are not the
run's and are not recorded; nor are those an installed library makes while it is being
imported (aiohttp seeds a ``random.Random`` in a class body, opentelemetry makes its context
keys with ``uuid.uuid4``): they happen wherever the process first imports it, in the run or
long before, so they are the process's warm-up, not the run's (a draw the agent's own modules
make at import is the run's). :func:`not_the_runs` tells them apart, for ``os.urandom`` here
and ``uuid.uuid4`` in :mod:`sandbox.capture.ids`.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from sandbox.capture.origin import IMPORTING, origin
from sandbox.capture.shared import Shared
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome
from sandbox.snapshot.events import Event, RandomDraw

URANDOM = "os.urandom"
"""The name of a draw's event."""
SEED_BYTES = 32
"""As many bytes as CPython seeds an unseeded ``random.Random`` with."""


class BytesAdapter:
    """Records the bytes a draw returned (hex); replay hands them back."""

    def record(self, call: Call, outcome: Outcome[bytes], emitter: Emitter) -> bytes:
        if outcome.value is not None:
            emitter.emit(RandomDraw, call, source=call.name, value=outcome.value.hex())
        if outcome.error is not None:
            raise outcome.error
        assert outcome.value is not None
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> bytes:
        assert isinstance(event, RandomDraw)
        return bytes.fromhex(str(event.value))


_ADAPTER = BytesAdapter()


def not_the_runs() -> bool:
    """Whether a draw, asked by the wrapper that the drawing code called, is not the run's:
    the code that drew (the first caller outside the standard library and this module) is
    the sandbox's own, or an installed library's run while the library is being imported
    (an import frame comes before any agent code)."""
    frame: Any = sys._getframe(2)
    while frame is not None and (
        frame.f_globals.get("__name__") == __name__ or origin(frame) == "stdlib"
    ):
        frame = frame.f_back
    drawer = None if frame is None else origin(frame)
    if drawer != "library":
        return drawer == "sandbox"
    while frame is not None:  # a library drew: was it being imported?
        if frame.f_code.co_filename.startswith(IMPORTING):
            return True
        if origin(frame) == "agent":
            return False  # the agent's own code called the library
        frame = frame.f_back
    return False


def patch_entropy() -> Callable[[], None]:
    """Wrap ``os.urandom`` and seed unseeded ``random.Random`` instances from it (once for
    every run of the process; a draw outside any run is not recorded); return the undo."""
    return _ENTROPY.acquire()


def _patch_entropy() -> Callable[[], None]:
    real_urandom = os.urandom
    real_random_urandom: Any = getattr(random, "_urandom")  # noqa: B009
    real_seed = random.Random.seed

    def urandom(size: int, /) -> bytes:
        if boundary.current() is None:
            return real_urandom(size)
        asked = time.perf_counter()
        if not_the_runs():
            return real_urandom(size)
        lead = time.perf_counter() - asked  # the stack walk: the draw began before it
        return boundary.through(
            "random", URANDOM, {"n": size}, lambda: real_urandom(size), _ADAPTER, lead=lead
        )

    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        if a is None:
            a = int.from_bytes(urandom(SEED_BYTES), "big")
        real_seed(self, a, version)

    os.urandom = urandom
    setattr(random, "_urandom", urandom)  # noqa: B010
    random.Random.seed = seed  # type: ignore[method-assign]

    def undo() -> None:
        if random.Random.seed is seed:
            random.Random.seed = real_seed  # type: ignore[method-assign]
        if getattr(random, "_urandom") is urandom:  # noqa: B009
            setattr(random, "_urandom", real_random_urandom)  # noqa: B010
        if os.urandom is urandom:
            os.urandom = real_urandom

    return undo


_ENTROPY = Shared(_patch_entropy)
