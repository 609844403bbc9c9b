"""Byte sizes as people read them, and as Docker's mount options write them."""

from __future__ import annotations

import re

_UNITS = ("B", "KB", "MB", "GB", "TB")
_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def human_size(n: int) -> str:
    """``512`` -> ``"512 B"``, ``1536`` -> ``"1.5 KB"`` (powers of 1024)."""
    size = float(n)
    unit = _UNITS[0]
    for unit in _UNITS:
        if size < 1024 or unit == _UNITS[-1]:
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


def tmpfs_size(options: str) -> int | None:
    """The ``size=`` of a tmpfs option string (``"rw,uid=999,size=256m"`` -> 268435456), or
    None when it sets none."""
    found = re.search(r"(?:^|,)size=(\d+)([kmg]?)(?:,|$)", options.lower())
    return int(found.group(1)) * _SUFFIX[found.group(2)] if found else None
