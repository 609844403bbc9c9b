"""Which captured runs stay in the store: all of them (the default), only those that failed
(``keep="failed"``), or those and a share of the others (``keep=0.01``).

A run that may be dropped is recorded aside: held in memory (its events, manifest and
blobs), written to a store of its own (in the real store's staging folder when it is a
folder, else in a temporary one) only when it ends kept or grows past a limit (see
:mod:`sandbox.capture.held`), and published to the real store only when it ends kept; one
not kept is let go whole, so it leaves nothing behind: no run folder, no blob, and, when it
never spilled, no file written at all. The decision is made when the run ends, from its
failure (a predicate, an exception, ``mark_failed``) and, for a rate, one draw of a sampler
that is not the agent's (its own generator: the run's randomness is untouched).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from sandbox.capture.held import HeldStore
from sandbox.errors import CaptureError
from sandbox.snapshot.store import Store

Keep = str | float
"""``"all"``, ``"failed"``, or a rate in [0, 1]: the share of the runs that did not fail
that are kept too (failed runs always are)."""

_SAMPLER = random.Random(int.from_bytes(os.urandom(16), "big")).random
"""The default sampler: a generator of its own, seeded once from the system."""


def check_keep(keep: object) -> Keep:
    """``keep`` itself when valid; otherwise a :class:`CaptureError` saying what is."""
    if keep in ("all", "failed"):
        return str(keep)
    if isinstance(keep, int | float) and not isinstance(keep, bool) and 0 <= keep <= 1:
        return float(keep)
    raise CaptureError(f"keep={keep!r}: expected 'all', 'failed' or a rate between 0 and 1")


def keeps_all(keep: Keep) -> bool:
    return keep == "all" or keep == 1.0


def kept(keep: Keep, failed: bool, sampler: Callable[[], float] | None = None) -> bool:
    """Whether a run that ended (``failed`` or not) stays in the store."""
    if keeps_all(keep) or failed:
        return True
    if isinstance(keep, str):  # "failed"
        return False
    return (sampler or _SAMPLER)() < keep


class Staging:
    """A run recorded aside until it is known to be kept: held in memory, in a folder aside
    once it spills (see :mod:`sandbox.capture.held`)."""

    def __init__(self, target: Store) -> None:
        self.target = target
        self.store = HeldStore(target)

    def publish(self, run_id: str) -> None:
        """Move the run, and the blobs the real store lacks, into the real store."""
        try:
            self.store.publish(run_id)
        finally:
            self.discard()

    def discard(self) -> None:
        self.store.discard()
