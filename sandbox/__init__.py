"""sandbox-replayer: capture a bad LLM-agent run and replay it in frozen containers.

The names below are imported on first use (PEP 562), so that ``import sandbox.errors`` and
the command line stay light."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.errors import SandboxError
    from sandbox.snapshot import SCHEMA_VERSION, DirectoryStore, Manifest, Snapshot, open_store

__version__ = "0.1.0"

_LAZY = {
    "SandboxError": "sandbox.errors",
    "SCHEMA_VERSION": "sandbox.snapshot",
    "DirectoryStore": "sandbox.snapshot",
    "Manifest": "sandbox.snapshot",
    "Snapshot": "sandbox.snapshot",
    "open_store": "sandbox.snapshot",
}

__all__ = [
    "SCHEMA_VERSION",
    "DirectoryStore",
    "Manifest",
    "SandboxError",
    "Snapshot",
    "__version__",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
