"""Marks on a captured failure that change what ``ci-repro`` expects of it.

A captured failure must reproduce until someone fixes it. ``sandbox mark RUN --fixed --by
COMMIT`` stores that as data in the run's manifest (:class:`~sandbox.snapshot.manifest.FixMark`):
from then on its replay is expected to be *gone*, and a reproduction is the bug coming back.
``--open`` takes the mark back. The mark travels with the run (export, push, a store committed
to git), so a CI that replays the store stays green after the fix and turns red if the bug
returns.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sandbox.errors import RegressionError
from sandbox.snapshot.manifest import FixMark, Manifest
from sandbox.snapshot.refs import rewrite_manifest
from sandbox.snapshot.store import Store


def _captured_failure(store: Store, run_id: str) -> Manifest:
    manifest = store.load_manifest(run_id)
    if manifest.status != "complete":
        raise RegressionError(f"run {run_id} is incomplete (its capture never finished)")
    if manifest.replay_of is not None:
        raise RegressionError(
            f"run {run_id} is a replay of {manifest.replay_of}: mark the captured run instead"
        )
    if manifest.failure is None or not manifest.failure.observed:
        raise RegressionError(f"run {run_id} has no captured failure to mark fixed")
    return manifest


def mark_fixed(
    store: Store, run_id: str, *, by: str | None = None, now: datetime | None = None
) -> Manifest:
    """Mark the captured failure of ``run_id`` fixed (by ``by``); return the new manifest."""
    manifest = _captured_failure(store, run_id)
    mark = FixMark(at=now or datetime.now(UTC), by=by or None)
    return rewrite_manifest(store, manifest.model_copy(update={"fixed": mark}))


def mark_open(store: Store, run_id: str) -> Manifest:
    """Take back a fixed mark: the failure of ``run_id`` is expected to reproduce again."""
    manifest = _captured_failure(store, run_id)
    return rewrite_manifest(store, manifest.model_copy(update={"fixed": None}))
