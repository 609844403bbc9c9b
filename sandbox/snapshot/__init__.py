"""The snapshot: versioned data model, content-addressed store, one-file bundles.

The names below are imported on first use (PEP 562): importing one submodule does not load
the others."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.snapshot.events import EVENT_ADAPTER, BlobRef, ErrorInfo, Event
    from sandbox.snapshot.manifest import SCHEMA_VERSION, Manifest
    from sandbox.snapshot.snapshot import Snapshot
    from sandbox.snapshot.store import DirectoryStore, RunWriter, Store, open_store

_LAZY = {
    "EVENT_ADAPTER": "events",
    "BlobRef": "events",
    "ErrorInfo": "events",
    "Event": "events",
    "SCHEMA_VERSION": "manifest",
    "Manifest": "manifest",
    "Snapshot": "snapshot",
    "DirectoryStore": "store",
    "RunWriter": "store",
    "Store": "store",
    "open_store": "store",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox.snapshot' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sandbox.snapshot.{module}"), name)
