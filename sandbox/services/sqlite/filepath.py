"""The file an ``sqlite3.connect`` argument names. Standard library only, and imports nothing
of the package: the capture's child-side reporter (``sandbox/capture/_site/_sandbox_report.py``)
loads this file by its path in an interpreter where the package cannot be imported."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit


def sqlite_path(database: Any, uri: bool) -> str | None:
    """The absolute path of a file database (``None``: in memory)."""
    text = os.fsdecode(database) if isinstance(database, bytes | os.PathLike) else str(database)
    if uri or text.startswith("file:"):
        parts = urlsplit(text)
        if "mode=memory" in parts.query:
            return None
        text = parts.path
    if not text or text == ":memory:":
        return None
    return os.path.abspath(text)
