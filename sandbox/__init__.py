"""sandbox-replayer: capture a bad LLM-agent run and replay it in frozen containers."""

from sandbox.errors import SandboxError
from sandbox.snapshot import SCHEMA_VERSION, DirectoryStore, Manifest, Snapshot, open_store

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "DirectoryStore",
    "Manifest",
    "SandboxError",
    "Snapshot",
    "__version__",
    "open_store",
]
