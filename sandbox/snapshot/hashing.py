"""Content addressing: SHA-256 of bytes, of a file and of canonical JSON."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from pydantic_core import to_json

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Made once: ``json.dumps`` with these options builds a new encoder on every call (the
bytes are the same)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no spaces: equal values give equal bytes."""
    return _CANONICAL.encode(value).encode()


def ordered_json(value: Any) -> bytes:
    """JSON with no spaces and keys in their order: what a recorded value is written as, so
    that it comes back exactly as it was (a tool's output with its keys unsorted). Written
    by pydantic-core, which reads it back (``NaN`` and ``Infinity`` as Python's ``json``
    writes them; a float is written in the shortest form that reads back the same, which
    may differ from Python's: ``0.000012`` for ``1.2e-05``). Fingerprints use
    :func:`canonical_json`, whose bytes never change."""
    return to_json(value, inf_nan_mode="constants")


def fingerprint(value: Any) -> str:
    return sha256_bytes(canonical_json(value))
