"""Structural diff of JSON-like values: which paths differ, shown compactly.

Used wherever replay shows a person what changed: a request with no recording, the first
divergent step, the end state of a service. Paths read like code: ``messages[2].content``,
``orders[3]``, ``["key with.dots"]``. In a list whose length changed, items are aligned with
:class:`difflib.SequenceMatcher`, so one inserted message shows as one added item rather than
every later item "changed"; a removed item is indexed in the expected list, an added item in
the actual one.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

Change = Literal["changed", "added", "removed"]


class _Missing:
    """The value on the side of a diff where a key or item does not exist."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values, where ``True`` is not ``1`` (Python's ``==`` says it is)."""
    if a is b:
        return True
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(json_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list | tuple):
        return (
            isinstance(b, list | tuple)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


@dataclass(frozen=True)
class FieldDiff:
    """One difference: the path, and the value on each side (:data:`MISSING` when absent)."""

    path: str
    expected: Any
    actual: Any

    @property
    def change(self) -> Change:
        if self.expected is MISSING:
            return "added"
        if self.actual is MISSING:
            return "removed"
        return "changed"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "change": self.change}
        if self.expected is not MISSING:
            out["expected"] = self.expected
        if self.actual is not MISSING:
            out["actual"] = self.actual
        return out

    def describe(self, width: int = 72) -> str:
        """One line: ``path: expected -> actual`` with long strings cut around the change."""
        where = self.path or "(whole value)"
        if self.change == "added":
            return f"{where}: added {short(self.actual, width)}"
        if self.change == "removed":
            return f"{where}: removed (was {short(self.expected, width)})"
        if isinstance(self.expected, str) and isinstance(self.actual, str):
            left, right = contrast(self.expected, self.actual, width)
            return f"{where}: {left} -> {right}"
        return f"{where}: {short(self.expected, width)} -> {short(self.actual, width)}"


def json_diff(expected: Any, actual: Any, path: str = "") -> list[FieldDiff]:
    """Every leaf-level difference between two JSON-like values, in document order."""
    out: list[FieldDiff] = []
    _diff(expected, actual, path, out)
    return out


def format_diffs(diffs: list[FieldDiff], limit: int = 12, indent: str = "  ") -> str:
    """The diffs as indented lines, at most ``limit`` of them."""
    lines = [indent + d.describe() for d in diffs[:limit]]
    if len(diffs) > limit:
        lines.append(f"{indent}... and {len(diffs) - limit} more differences")
    return "\n".join(lines)


def join_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if _IDENT.match(text):
        return f"{path}.{text}" if path else text
    return f"{path}[{json.dumps(text, ensure_ascii=False)}]"


def short(value: Any, width: int = 72) -> str:
    """Compact JSON of ``value``, cut to ``width`` characters."""
    if value is MISSING:
        return "<missing>"
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def contrast(a: str, b: str, width: int = 72, context: int = 16) -> tuple[str, str]:
    """Both strings, quoted, cut to show where they differ: ``'…order 4[2]…'``.

    The common prefix and suffix are shortened to ``context`` characters each; the differing
    middles are marked with brackets when anything was cut.
    """
    if len(a) + 2 <= width and len(b) + 2 <= width:
        return json.dumps(a, ensure_ascii=False), json.dumps(b, ensure_ascii=False)
    prefix = 0
    limit = min(len(a), len(b))
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
        suffix += 1
    middle = max(width - 2 * context - 8, 8)

    def cut(s: str) -> str:
        head = s[:prefix]
        mid = s[prefix : len(s) - suffix]
        tail = s[len(s) - suffix :]
        head = ("…" + head[-context:]) if len(head) > context else head
        tail = (tail[:context] + "…") if len(tail) > context else tail
        mid = mid if len(mid) <= middle else mid[: middle - 1] + "…"
        return json.dumps(f"{head}[{mid}]{tail}", ensure_ascii=False)

    return cut(a), cut(b)


def _element_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def _diff(a: Any, b: Any, path: str, out: list[FieldDiff]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key, value in a.items():
            sub = join_path(path, key)
            if key in b:
                _diff(value, b[key], sub, out)
            else:
                out.append(FieldDiff(sub, value, MISSING))
        for key, value in b.items():
            if key not in a:
                out.append(FieldDiff(join_path(path, key), MISSING, value))
        return
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        _diff_lists(list(a), list(b), path, out)
        return
    if not json_equal(a, b):
        out.append(FieldDiff(path, a, b))


def _diff_lists(a: list[Any], b: list[Any], path: str, out: list[FieldDiff]) -> None:
    if len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, join_path(path, i), out)
        return
    matcher = difflib.SequenceMatcher(
        None, [_element_key(x) for x in a], [_element_key(y) for y in b], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for d in range(paired):
            _diff(a[i1 + d], b[j1 + d], join_path(path, i1 + d), out)
        for i in range(i1 + paired, i2):
            out.append(FieldDiff(join_path(path, i), a[i], MISSING))
        for j in range(j1 + paired, j2):
            out.append(FieldDiff(join_path(path, j), MISSING, b[j]))
