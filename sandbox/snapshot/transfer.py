"""Copy a run from one store to another: ``sandbox push`` and ``sandbox pull``."""

from __future__ import annotations

from sandbox.snapshot.store import Store


def copy_run(source: Store, target: Store, run_id: str, *, overwrite: bool = False) -> int:
    """Copy a run (its exact event log, its manifest, the blobs it references that the
    target lacks, each checked against its SHA-256); return how many blobs were copied."""
    snapshot = source.load(run_id)
    events = source.read_events_bytes(run_id)
    copied = 0
    for key in sorted(snapshot.blob_refs()):
        if not target.claim_blob(key):
            target.put_blob(source.get_verified_blob(key))
            copied += 1
    target.save_raw(snapshot.manifest, events, overwrite=overwrite)
    return copied
