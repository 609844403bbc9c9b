"""Randomness and ids: seeds are chosen, applied and recorded; ``uuid.uuid4`` becomes a seeded
generator whose every draw goes through the seam (so replay hands out the same ids)."""

from __future__ import annotations

import importlib.util
import random
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

from sandbox.capture.entropy import not_the_runs
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


def derive_seed(seed: int, what: str) -> int:
    """A distinct, stable 32-bit seed per generator from the run's seed."""
    return random.Random(f"{seed}:{what}").getrandbits(32)


def seed_generators(seed: int, *, numpy: bool = True) -> dict[str, int]:
    """Seed ``random`` (and numpy when installed) through the seam; return the seeds used."""
    seeds: dict[str, int] = {}

    def seed_random() -> int:
        random.seed(seed)
        return seed

    seeds["random"] = boundary.through(
        "random", "random.seed", {"seed": seed}, seed_random, SeedAdapter()
    )
    if numpy and ("numpy" in sys.modules or importlib.util.find_spec("numpy") is not None):
        np_seed = derive_seed(seed, "numpy")

        def seed_numpy() -> int:
            np: Any = __import__("numpy")
            np.random.seed(np_seed)
            return np_seed

        seeds["numpy"] = boundary.through(
            "random", "numpy.random.seed", {"seed": np_seed}, seed_numpy, SeedAdapter()
        )
    return seeds


def patch_uuid4(seed: int) -> Callable[[], None]:
    """Replace ``uuid.uuid4`` with a seeded generator whose draws cross the seam; return the
    function that restores the original. Code that did ``from uuid import uuid4`` before the
    patch keeps the original. A draw that is not the run's (see
    :func:`sandbox.capture.entropy.not_the_runs`) is the original's, not recorded."""
    original = uuid.uuid4
    generator = SeededUUID(seed)
    adapter = UUIDAdapter()

    def uuid4() -> uuid.UUID:
        if not_the_runs():  # the sandbox's, or a library's as it is imported: not seeded
            return original()
        return boundary.through("random", "uuid4", None, generator, adapter)

    uuid.uuid4 = uuid4

    def restore() -> None:
        if uuid.uuid4 is uuid4:
            uuid.uuid4 = original

    return restore
