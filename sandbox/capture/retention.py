"""Which captured runs stay in the store: all of them (the default), only those that failed
(``keep="failed"``), or those and a share of the others (``keep=0.01``).

A run that may be dropped is recorded aside, in a store of its own (in the real store's
staging folder when it is a folder, else in a temporary one), and published to the real store
only when it ends kept; one not kept is removed whole, so it leaves nothing behind: no run
folder, no blob. The decision is made when the run ends, from its failure (a predicate, an
exception, ``mark_failed``) and, for a rate, one draw of a sampler that is not the agent's
(its own generator: the run's randomness is untouched).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from sandbox.errors import CaptureError
from sandbox.snapshot.store import EVENTS, MANIFEST, DirectoryStore, Store

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


class _StagedStore(DirectoryStore):
    """A store of one run, aside: the real store's placeholder key, its own folders."""

    def __init__(self, root: Path, target: Store) -> None:
        super().__init__(root)
        self.target = target
        self._key: bytes | None = None

    def placeholder_key(self) -> bytes:
        if self._key is None:
            self._key = self.target.placeholder_key()
        return self._key


class Staging:
    """A run recorded aside until it is known to be kept."""

    def __init__(self, target: Store) -> None:
        base = target.staging_dir() if isinstance(target, DirectoryStore) else None
        self.root = Path(tempfile.mkdtemp(dir=base, prefix="keep-"))
        self.target = target
        self.store = _StagedStore(self.root, target)

    def publish(self, run_id: str) -> None:
        """Move the run, and the blobs the real store lacks, into the real store."""
        try:
            for key in self.store.iter_blobs():
                if not self.target.has_blob(key):
                    self.target.put_blob_file(self.store.blob_path(key), key)
            folder = self.store.run_dir(run_id)
            manifest = self.store.load_manifest(run_id)
            self.target.save_raw(manifest, folder / EVENTS)
            for path in folder.iterdir():
                if path.name not in (MANIFEST, EVENTS) and path.is_file():
                    self.target.put_run_file(run_id, path.name, path.read_bytes())
        finally:
            self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
