"""Byte sizes as people read them."""

from __future__ import annotations

_UNITS = ("B", "KB", "MB", "GB", "TB")


def human_size(n: int) -> str:
    """``512`` -> ``"512 B"``, ``1536`` -> ``"1.5 KB"`` (powers of 1024)."""
    size = float(n)
    unit = _UNITS[0]
    for unit in _UNITS:
        if size < 1024 or unit == _UNITS[-1]:
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
