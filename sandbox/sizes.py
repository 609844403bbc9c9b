"""Byte sizes as people read them."""

from __future__ import annotations

import re

from sandbox.errors import SandboxError

_UNITS = ("B", "KB", "MB", "GB", "TB")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([kmgt]?)i?b?")


def human_size(n: int) -> str:
    """``512`` -> ``"512 B"``, ``1536`` -> ``"1.5 KB"`` (powers of 1024)."""
    size = float(n)
    unit = _UNITS[0]
    for unit in _UNITS:
        if size < 1024 or unit == _UNITS[-1]:
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


def parse_size(text: str) -> int:
    """Bytes in a size as :func:`human_size` writes it or people type it: ``500M``, ``10G``,
    ``1.5GiB``, ``4096`` (powers of 1024)."""
    found = _SIZE.fullmatch(text.strip().lower())
    if found is None:
        raise SandboxError(f"--max-size {text!r}: expected bytes or a number with K, M, G or T")
    power = "bkmgt".index(found[2] or "b")
    return int(float(found[1]) * 1024**power)
