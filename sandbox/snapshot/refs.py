"""Runs by name: wherever a command takes a run, it may be given a run id, a tag, or a name.

Run ids carry a time stamp (``orders-20240301T120000Z-a1b2c3``); people, tests and CI would
rather say ``orders``. :func:`resolve_run` takes the reference as a run id when the store holds
one by that id; else as a tag (``sandbox tag RUN TAG``: a tag names exactly one run of the
store, the one it was last given to); else as a run name, meaning the newest captured run of
that name (replays and forks are left out: they take their parent's name).
"""

from __future__ import annotations

import re

from sandbox.errors import StoreError
from sandbox.snapshot.manifest import RUN_ID_PATTERN, Manifest
from sandbox.snapshot.store import Store, unknown_run

_RUN_ID = re.compile(RUN_ID_PATTERN)


def _is_id(store: Store, ref: str) -> bool:
    if not _RUN_ID.match(ref):
        return False
    try:
        return store.exists(ref)
    except StoreError:
        return False


def resolve_run(store: Store, ref: str) -> str:
    """The run id ``ref`` stands for in ``store`` (see the module documentation); raise
    :class:`~sandbox.errors.UnknownRunError` naming the nearest ids when it stands for none."""
    if _is_id(store, ref):
        return ref
    manifests = store.list()
    tagged = [m for m in manifests if ref in m.tags]
    if tagged:
        return tagged[-1].run_id
    named = [m for m in manifests if m.name == ref and m.replay_of is None]
    if named:
        return named[-1].run_id
    raise unknown_run(store, ref)


def tag_run(store: Store, run_id: str, tag: str) -> Manifest:
    """Give ``tag`` to run ``run_id`` (taking it from the run that had it); return the run's
    new manifest."""
    tag = tag.strip()
    if not tag:
        raise StoreError("a tag must not be empty")
    if _is_id(store, tag) and tag != run_id:
        raise StoreError(f"{tag!r} is the id of another run: a tag must not hide a run id")
    for holder in store.list():
        if tag in holder.tags and holder.run_id != run_id:
            rewrite_manifest(
                store, holder.model_copy(update={"tags": [t for t in holder.tags if t != tag]})
            )
    manifest = store.load_manifest(run_id)
    if tag in manifest.tags:
        return manifest
    return rewrite_manifest(store, manifest.model_copy(update={"tags": [*manifest.tags, tag]}))


def rewrite_manifest(store: Store, manifest: Manifest) -> Manifest:
    """Commit ``manifest`` over the run's, its event log unchanged (atomic on any store)."""
    store.save_raw(manifest, store.read_events_bytes(manifest.run_id), overwrite=True)
    return manifest
