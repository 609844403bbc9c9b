"""Pruning a store that capture fills on its own (``keep="failed"`` in a service): runs older
than an age, then the oldest runs while the store is over a size, then the blobs that only
the removed runs referenced (``sandbox gc --runs --older-than 7d --max-size 10G``).

The size of a store is its runs' own files plus the distinct blobs they reference (a blob
shared by two runs counts once, and is removed only with the last run that references it).
Runs are told apart by when they were captured (the manifest's ``created``), oldest first.
A run the store cannot read (damaged) is neither counted nor removed: ``sandbox list`` shows
it, ``sandbox verify`` says why.

Pruning is meant to run beside capture (a cron job). A run is not listed until its manifest
is written, after its blobs; a run that writes or reuses a blob the store holds claims it
(:meth:`~sandbox.snapshot.store.Store.claim_blob`). So a blob that only the removed runs
referenced stays when a run wrote or claimed it in the ``claimed_within`` seconds
(:data:`~sandbox.snapshot.store.CLAIM_GRACE`, an hour) before the pruning began, or since:
a run still being published may reference it. In a folder store that holds without a gap
(the blob is renamed aside before its time is read); in an object store, a claim in the
instant between that look and the removal is still lost, as ``sandbox verify`` would then
say.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass

from sandbox.errors import SandboxError
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import CLAIM_GRACE, Store, referenced_blobs

_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str, option: str = "--older-than") -> float:
    """Seconds in an age such as ``7d``, ``12h``, ``30m``, ``90s`` or ``2w``."""
    found = _AGE.fullmatch(text.strip().lower())
    if found is None:
        raise SandboxError(f"{option} {text!r}: expected a number and a unit (s, m, h, d, w)")
    return float(found[1]) * _AGE_UNITS[found[2]]


@dataclass(frozen=True)
class Pruned:
    """What a prune removed (or, dry, would remove)."""

    runs: tuple[str, ...]
    blobs: int
    claimed: int
    """Blobs only the removed runs referenced, kept: a run wrote or claimed them lately."""
    freed: int
    """Bytes: the removed runs' files and blobs."""
    remaining: int
    """Runs left in the store."""
    size: int
    """Bytes the store holds afterwards (runs and the blobs they reference)."""


def prune(
    store: Store,
    *,
    older_than: float | None = None,
    max_bytes: int | None = None,
    now: float | None = None,
    dry_run: bool = False,
    claimed_within: float = CLAIM_GRACE,
) -> Pruned:
    """Remove the runs captured more than ``older_than`` seconds before ``now``, then the
    oldest runs while the store holds more than ``max_bytes``, then the blobs that only the
    removed runs referenced and no run claimed in the ``claimed_within`` seconds before this
    call (of the real clock) or since (see the module documentation). ``dry_run``: remove
    nothing (every such blob is counted as removed)."""
    if older_than is None and max_bytes is None:
        raise SandboxError("gc --runs: say which runs go (--older-than AGE, --max-size SIZE)")
    since = time.time() - claimed_within
    manifests = store.list()  # oldest first
    own = {m.run_id: store.run_bytes(m.run_id) for m in manifests}
    blobs = {m.run_id: _blobs(store, m) for m in manifests}
    cutoff = None if older_than is None else (time.time() if now is None else now) - older_than
    doomed = [m.run_id for m in manifests if cutoff is not None and m.created.timestamp() < cutoff]
    gone = set(doomed)
    left = [m.run_id for m in manifests if m.run_id not in gone]
    holders: Counter[str] = Counter()  # how many runs left reference each blob
    kept: dict[str, int] = {}
    for run_id in left:
        holders.update(blobs[run_id].keys())
        kept.update(blobs[run_id])
    size = sum(own[r] for r in left) + sum(kept.values())
    oldest = 0
    while max_bytes is not None and oldest < len(left) and size > max_bytes:
        run_id = left[oldest]
        oldest += 1
        doomed.append(run_id)
        size -= own[run_id]
        for key in blobs[run_id]:
            holders[key] -= 1
            if not holders[key]:
                size -= kept.pop(key)
    orphans: dict[str, int] = {}
    claimed = 0
    for run_id in doomed:
        orphans.update((k, n) for k, n in blobs[run_id].items() if k not in kept)
    if not dry_run:
        for run_id in doomed:
            store.delete(run_id)
        for manifest in store.list():  # a run that came meanwhile keeps what it references
            if manifest.run_id not in blobs:
                for key in _blobs(store, manifest):
                    orphans.pop(key, None)
        for key in list(orphans):
            if not store.delete_blob_unclaimed(key, since):
                del orphans[key]
                claimed += 1
    return Pruned(
        runs=tuple(doomed),
        blobs=len(orphans),
        claimed=claimed,
        freed=sum(own[r] for r in doomed) + sum(orphans.values()),
        remaining=len(left) - oldest,
        size=size,
    )


def _blobs(store: Store, manifest: Manifest) -> dict[str, int]:
    """The blobs run ``manifest`` references, with their sizes."""
    return referenced_blobs(manifest, store.read_events_bytes(manifest.run_id))
