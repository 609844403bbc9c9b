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


def iter_blob_refs(models: Iterable[BaseModel]) -> Iterator[BlobRef]:
    """Every :class:`BlobRef` nested anywhere in these models."""
    stack: list[object] = list(models)
    while stack:
        item = stack.pop()
        if isinstance(item, BlobRef):
            yield item
        elif isinstance(item, BaseModel):
            stack.extend(getattr(item, name) for name in type(item).model_fields)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
