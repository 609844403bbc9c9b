"""The snapshot: versioned data model, content-addressed store, one-file bundles."""

from sandbox.snapshot.events import EVENT_ADAPTER, BlobRef, ErrorInfo, Event
from sandbox.snapshot.manifest import SCHEMA_VERSION, Manifest
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.store import DirectoryStore, RunWriter, Store, open_store

__all__ = [
    "EVENT_ADAPTER",
    "SCHEMA_VERSION",
    "BlobRef",
    "DirectoryStore",
    "ErrorInfo",
    "Event",
    "Manifest",
    "RunWriter",
    "Snapshot",
    "Store",
    "open_store",
]
