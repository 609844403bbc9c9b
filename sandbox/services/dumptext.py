"""What a service dump holds, as text with the place it is at (a table's column and row, a
key's value, a file's line): each kind reads its own dumps (:class:`DumpText`), and
:mod:`sandbox.services.sharescan` scans what they find before a run is shared.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol, runtime_checkable

from sandbox.services.registry import kinds

Place = tuple[str, str]
"""Where a piece of text is (``table public.users column email (row 3)``), and the text."""


def text_places(where: str, data: bytes) -> Iterator[Place]:
    """The lines of ``data`` when it is text (a NUL byte says it is not)."""
    if b"\0" in data[:8192]:
        return
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if line.strip():
            yield f"{where} line {number}", line


@runtime_checkable
class DumpText(Protocol):
    """A kind that says what text its dumps hold, for the scan before a run is shared."""

    dump_media_types: ClassVar[frozenset[str]]
    """The media types of its captures (:attr:`~sandbox.services.base.CapturedState.media_type`)."""

    def dump_places(self, media_type: str, data: bytes) -> Iterator[Place]:
        """The text a capture of this media type holds, with where it is."""
        ...


def dump_places(media_type: str, data: bytes) -> Iterator[Place]:
    """The text a service dump of this media type holds, with where it is (read by the kind
    whose dumps have that media type; another blob's text lines otherwise)."""
    media = media_type.split(";")[0].strip().lower()
    for kind in kinds().values():
        if isinstance(kind, DumpText) and media in kind.dump_media_types:
            yield from kind.dump_places(media, data)
            return
    yield from text_places("blob", data)
