"""Plain-text tables that stay readable in a narrow terminal (80 columns), and fast for
thousands of rows (no measuring by a rich table).

Run ids are copied from these tables, so they are never cut: an id column keeps the longest id
whole whenever the terminal leaves room, and folds (every character kept, no ellipsis) only
when it does not. Columns marked to wrap or to truncate give way first, down to their least
width: one wraps at spaces, the other is cut with an ellipsis (one line per row; the whole
text is in ``--json``). A column marked optional is left out when the others do not fit
with it. With ``width=None`` (``--wide``) every cell is printed whole on one line.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

GAP = 2
"""Spaces between two columns."""

MIN_ID = 12
"""The narrowest an id column gets on a very narrow terminal (it folds then)."""


@dataclass(frozen=True)
class Col:
    header: str
    wrap: int | None = None
    """The least width this column wraps down to; ``None``: it keeps its width."""
    right: bool = False
    is_id: bool = False
    truncate: int | None = None
    """The least width this column is cut down to (with an ellipsis); ``None``: it is not."""
    optional: bool = False
    """Left out when the table does not fit the width with it."""


def terminal_width() -> int:
    """``$COLUMNS``, else the terminal's width, else 80."""
    return shutil.get_terminal_size((80, 24)).columns


def render(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int | None) -> Iterator[str]:
    """The lines of the table (header, rule, rows), at most ``width`` characters wide when the
    ids fit in it."""
    widths = [max(len(c.header), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    if width is not None:
        _shrink(cols, widths, width)
        if _total(widths) > width and any(c.optional for c in cols):
            keep = [i for i, c in enumerate(cols) if not c.optional]
            yield from render([cols[i] for i in keep], [[r[i] for i in keep] for r in rows], width)
            return
        _fold_ids(cols, widths, width)
    yield _join(cols, widths, [c.header for c in cols]).rstrip()
    yield "-" * _total(widths)
    for row in rows:
        cells = [_lines(c, cell, w) for c, cell, w in zip(cols, row, widths, strict=True)]
        for k in range(max(len(lines) for lines in cells)):
            parts = [lines[k] if k < len(lines) else "" for lines in cells]
            yield _join(cols, widths, parts).rstrip()


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + GAP * (len(widths) - 1)


def _shrink(cols: Sequence[Col], widths: list[int], width: int) -> None:
    over = _total(widths) - width
    for i in sorted(range(len(cols)), key=lambda i: -widths[i]):
        least = cols[i].wrap if cols[i].truncate is None else cols[i].truncate
        if over > 0 and least is not None and widths[i] > least:
            give = min(over, widths[i] - least)
            widths[i] -= give
            over -= give


def _fold_ids(cols: Sequence[Col], widths: list[int], width: int) -> None:
    over = _total(widths) - width
    for i, col in enumerate(cols):
        if over > 0 and col.is_id and widths[i] > MIN_ID:
            give = min(over, widths[i] - MIN_ID)
            widths[i] -= give
            over -= give


def _lines(col: Col, cell: str, width: int) -> list[str]:
    if len(cell) <= width:
        return [cell]
    if col.truncate is not None:
        return [cell[: width - 1].rstrip() + "…"]
    if col.is_id or col.wrap is None:
        return [cell[i : i + width] for i in range(0, len(cell), width)]  # fold, never cut
    return textwrap.wrap(cell, width) or [""]


def _join(cols: Sequence[Col], widths: Sequence[int], parts: Sequence[str]) -> str:
    return (" " * GAP).join(
        p.rjust(w) if c.right else p.ljust(w) for c, w, p in zip(cols, widths, parts, strict=True)
    )
