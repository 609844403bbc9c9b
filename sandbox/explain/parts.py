"""The parts of a restored service's state that a trial can remove: a table's rows, a key,
a file, as its kind lists them.

The parts are read from the restored service (its kind's ``describe``), so they are what the
captured state holds; a trial removes the released ones after each reset, on top of the
captured state, and the next reset brings them back. A service with more than
:data:`MAX_PARTS` parts is one part (``everything``): ddmin over a thousand keys would spend
the budget on them. Each kind lists and removes its own parts
(:class:`~sandbox.services.base.StateParts`); a kind without them keeps its state whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandbox.services.base import StateParts
from sandbox.services.registry import get_kind, kinds

MAX_PARTS = 12
EVERYTHING = "everything"


def _parts(kind: str) -> StateParts | None:
    """The kind's parts, when it is a registered kind that has them."""
    found = kinds().get(kind)
    return found if isinstance(found, StateParts) else None


def _describe(kind: str, endpoint: str, limit: int) -> dict[str, object]:
    return dict(get_kind(kind).describe(endpoint, limit=limit))


def parts_of(kind: str, endpoint: str) -> list[str]:
    """The removable parts of the state behind ``endpoint`` (labels such as ``table
    orders``), :data:`EVERYTHING` alone when there are more than :data:`MAX_PARTS`, none
    for a kind with no remover or an empty state."""
    entry = _parts(kind)
    if entry is None:
        return []
    description = _describe(kind, endpoint, MAX_PARTS + 1)
    found = entry.parts(description)
    cut = description.get("truncated")
    if len(found) > MAX_PARTS or (isinstance(cut, dict) and {"keys", "files"} & set(cut)):
        return [EVERYTHING]
    return found


def remove(kind: str, endpoint: str, parts: Sequence[str]) -> None:
    """Remove the named parts (labels from :func:`parts_of`) from the state behind
    ``endpoint``."""
    entry = _parts(kind)
    if entry is None or not parts:
        return
    prefix = entry.part_label
    if EVERYTHING in parts:
        # one row per table is enough to list the tables; keys and files are listed whole
        parts = entry.parts(_describe(kind, endpoint, 1 if prefix == "table " else 10**9))
    entry.remove_parts(endpoint, [p.removeprefix(prefix) for p in parts])
