"""A snapshot in memory: the manifest, the events, and the blobs they reference."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel

from sandbox.snapshot.events import BlobRef, Event
from sandbox.snapshot.manifest import Manifest


@dataclass
class Snapshot:
    manifest: Manifest
    events: list[Event] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    def blob_refs(self) -> set[str]:
        """SHA-256 keys of every blob the manifest and events reference."""
        return {ref.sha256 for ref in iter_blob_refs([self.manifest, *self.events])}


_LEAVES = (str, int, float, type(None))
"""Values that hold nothing (bools are ints): never pushed on the walk's stack."""


def iter_blob_refs(models: Iterable[BaseModel]) -> Iterator[BlobRef]:
    """Every :class:`BlobRef` nested anywhere in these models."""
    stack: list[object] = list(models)
    while stack:
        item = stack.pop()
        if isinstance(item, BlobRef):
            yield item
        elif isinstance(item, BaseModel):
            values = (getattr(item, name) for name in type(item).model_fields)
            stack.extend(v for v in values if not isinstance(v, _LEAVES))
        elif isinstance(item, list | tuple):
            stack.extend(v for v in item if not isinstance(v, _LEAVES))
        elif isinstance(item, dict):
            stack.extend(v for v in item.values() if not isinstance(v, _LEAVES))
