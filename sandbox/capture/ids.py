"""Randomness and ids: seeds are chosen, applied and recorded; ``uuid.uuid4`` becomes a seeded
generator whose every draw goes through the seam (so replay hands out the same ids)."""

from __future__ import annotations

import functools
import importlib.util
import random
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

from sandbox.capture.entropy import not_the_runs
from sandbox.capture.rebind import Rebinder
from sandbox.capture.shared import Shared
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome
from sandbox.snapshot.events import Event, RandomDraw


class SeededUUID:
    """``uuid4`` from a seeded generator: the same seed gives the same ids in the same order."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self) -> uuid.UUID:
        with self._lock:
            bits = self._rng.getrandbits(128)
        return uuid.UUID(int=bits, version=4)


class UUIDAdapter:
    def record(self, call: Call, outcome: Outcome[uuid.UUID], emitter: Emitter) -> uuid.UUID:
        if outcome.value is not None:
            emitter.emit(RandomDraw, call, source=call.name, value=str(outcome.value))
        assert outcome.value is not None or outcome.error is not None
        return outcome.value  # type: ignore[return-value]

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> uuid.UUID:
        assert isinstance(event, RandomDraw)
        return uuid.UUID(str(event.value))


class SeedAdapter:
    """A seed applied to a generator: recorded as a ``random`` event with the seed."""

    def record(self, call: Call, outcome: Outcome[int], emitter: Emitter) -> int:
        seed = outcome.value if outcome.value is not None else 0
        if outcome.error is None:
            emitter.emit(RandomDraw, call, source=call.name, seed=seed)
        return seed

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> int:
        assert isinstance(event, RandomDraw)
        return event.seed or 0


@functools.lru_cache(maxsize=256)
def derive_seed(seed: int, what: str) -> int:
    """A distinct, stable 32-bit seed per generator from the run's seed (remembered: a
    run asks for the same one more than once)."""
    return random.Random(f"{seed}:{what}").getrandbits(32)


@functools.cache
def _numpy_installed() -> bool:
    return importlib.util.find_spec("numpy") is not None


def seed_generators(seed: int, *, numpy: bool = True) -> dict[str, int]:
    """Seed ``random`` (and numpy when installed) through the seam; return the seeds used."""
    seeds: dict[str, int] = {}

    def seed_random() -> int:
        random.seed(seed)
        return seed

    seeds["random"] = boundary.through(
        "random", "random.seed", {"seed": seed}, seed_random, SeedAdapter()
    )
    if numpy and ("numpy" in sys.modules or _numpy_installed()):
        np_seed = derive_seed(seed, "numpy")

        def seed_numpy() -> int:
            np: Any = __import__("numpy")
            np.random.seed(np_seed)
            return np_seed

        seeds["numpy"] = boundary.through(
            "random", "numpy.random.seed", {"seed": np_seed}, seed_numpy, SeedAdapter()
        )
    return seeds


def patch_uuid4(seed: int | None = None) -> Callable[[], None]:
    """Replace ``uuid.uuid4`` (once for every run of the process) with a function whose draws
    cross the seam, each from the seeded generator of the run drawing (its ``uuid4_source``,
    see :func:`sandbox.capture.run.start_recording`), else from one seeded with ``seed`` (in
    a process with no boundary, one the replay runs live, unrecorded);
    return the function that stops it (for this holder). A module that did ``from uuid
    import uuid4`` before the patch is rebound to it while it holds, so a capture started
    inside the program and its replay (patched before the program's imports) draw alike
    (:mod:`sandbox.capture.rebind`). A draw outside any run, of a run with no generator, or
    that is not the run's (see :func:`sandbox.capture.entropy.not_the_runs`) is the
    original's, not recorded."""
    release = _UUID4.acquire()
    if seed is None:
        return release
    generator = SeededUUID(seed)
    _fallback.append(generator)

    def stop() -> None:
        if generator in _fallback:
            _fallback.remove(generator)
        release()

    return stop


_fallback: list[SeededUUID] = []
"""Generators of :func:`patch_uuid4` callers that gave a seed (the last one wins)."""


def _patch_uuid4() -> Callable[[], None]:
    original = uuid.uuid4
    adapter = UUIDAdapter()

    def uuid4() -> uuid.UUID:
        seam = boundary.current()
        if seam is None and _fallback and not not_the_runs():
            return _fallback[-1]()  # a process the replay runs live: seeded, nothing to record
        if seam is None or not_the_runs():  # the sandbox's, or a library's as it is imported
            return original()
        generator = getattr(seam, "uuid4_source", None) or (_fallback[-1] if _fallback else None)
        if generator is None:
            return original()
        return boundary.through("random", "uuid4", None, generator, adapter)

    uuid.uuid4 = uuid4
    unbind = _EARLY.rebind({original: uuid4})

    def restore() -> None:
        unbind()
        if uuid.uuid4 is uuid4:
            uuid.uuid4 = original

    return restore


_EARLY = Rebinder()
"""The modules that did ``from uuid import uuid4`` before the patch (see
:mod:`sandbox.capture.rebind`)."""
_UUID4 = Shared(_patch_uuid4)
