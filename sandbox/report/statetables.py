"""End-state differences as the tables a person reads: per service, the rows of each database
table, the Redis keys and the files that differ, with the original's and the replay's value.

A service kind describes its state as ``{"tables": {name: [row, ...]}}``,
``{"keys": {key: {...}}}`` or ``{"files": {path: {...}}}``, and
:func:`~sandbox.replay.judging.divergence.diff_states` names each difference by a path into that
description (``tables.orders[1]``, ``keys["cart:7"].value``, ``files["a/b.txt"].sha256``).
Rows whose whole value was added or removed are shown with their columns; any other
difference as one line (what, field, original, replay).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.replay.judging.divergence import StateDiff
from sandbox.replay.judging.jsondiff import MISSING

_HEAD = re.compile(r'^(tables|keys|files)(?:\.([A-Za-z_][A-Za-z0-9_-]*)|\[("(?:[^"\\]|\\.)*")\])')
_ROW = re.compile(r"^\[(\d+)\]")
CATEGORY = {"tables": "rows", "keys": "keys", "files": "files"}
WHAT = {"rows": "row", "keys": "key", "files": "file", "state": "path"}
CHANGE = {
    "removed": "missing from the replay",
    "added": "extra in the replay",
    "changed": "changed",
}


@dataclass
class StateTable:
    """One table of the page: a service's rows of one database table, its keys or files."""

    service: str
    category: str
    """``rows``, ``keys``, ``files``, or ``state`` (anything else, such as a whole-state hash)."""
    name: str = ""
    """The database table, for ``rows``."""
    columns: list[str] = field(default_factory=list)
    """Row columns, when every difference is a whole row added or removed."""
    lines: list[dict[str, Any]] = field(default_factory=list)
    """Each: ``what`` (row number, key, file), ``field``, ``change``, ``expected``,
    ``actual`` (JSON text, or ``""`` when absent), ``row`` (the row's values by column)."""

    @property
    def title(self) -> str:
        if self.category == "rows":
            return f"{self.service}: rows of table {self.name}"
        return f"{self.service}: {self.category}"

    @property
    def what(self) -> str:
        return WHAT[self.category]


def _text(value: Any) -> str:
    if value is MISSING:
        return ""
    return value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False)


def _split(path: str) -> tuple[str, str, str, str]:
    """``(category, table, what, field)`` of a state path."""
    head = _HEAD.match(path)
    if head is None:
        return "state", "", path or "(whole state)", ""
    category = CATEGORY[head.group(1)]
    name = head.group(2) if head.group(2) is not None else json.loads(head.group(3))
    rest = path[head.end() :]
    if category != "rows":
        return category, "", name, rest.lstrip(".")
    row = _ROW.match(rest)
    if row is None:
        return category, name, "(table)", rest.lstrip(".")
    return category, name, str(int(row.group(1)) + 1), rest[row.end() :].lstrip(".")


def state_tables(diffs: Sequence[StateDiff]) -> list[StateTable]:
    """The differences grouped into tables, in the order they first appear."""
    tables: dict[tuple[str, str, str], StateTable] = {}
    for diff in diffs:
        category, name, what, path = _split(diff.path)
        table = tables.setdefault(
            (diff.service, category, name), StateTable(diff.service, category, name)
        )
        value = diff.actual if diff.expected is MISSING else diff.expected
        table.lines.append(
            {
                "what": what,
                "field": path,
                "change": CHANGE[diff.change],
                "status": diff.change,
                "expected": _text(diff.expected),
                "actual": _text(diff.actual),
                "row": value if isinstance(value, dict) and not path else None,
            }
        )
    for table in tables.values():
        if table.category == "rows" and all(line["row"] is not None for line in table.lines):
            table.columns = list(dict.fromkeys(k for line in table.lines for k in line["row"]))
            for line in table.lines:
                line["cells"] = [_cell(line["row"], column) for column in table.columns]
    return list(tables.values())


def _cell(row: dict[str, Any], column: str) -> str:
    if column not in row:
        return ""
    value = row[column]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
