"""Content addressing: SHA-256 of bytes, of a file and of canonical JSON; JSON written and
read as recorded values are."""

from __future__ import annotations

import hashlib
import json
import json.encoder
import os
from typing import Any

from pydantic_core import from_json, to_json

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Made once: ``json.dumps`` with these options builds a new encoder on every call (the
bytes are the same)."""
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL: Any = (
    None
    if _MAKE_ENCODER is None
    else _MAKE_ENCODER(
        None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )
)
"""The C encoder :data:`_CANONICAL` makes on each ``encode`` (one call of it: the same
chunks, no check for a value holding itself, which JSON data never does), made once."""


_SHA256 = hashlib.sha256()
"""Never updated: a copy of it is a new hash without looking the algorithm up again."""


def sha256_bytes(data: bytes) -> str:
    digest = _SHA256.copy()
    digest.update(data)
    return digest.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no spaces: equal values give equal bytes."""
    if _C_CANONICAL is None or isinstance(value, str):
        return _CANONICAL.encode(value).encode()
    return "".join(_C_CANONICAL(value, 0)).encode()


def ordered_json(value: Any) -> bytes:
    """JSON with no spaces and keys in their order: what a recorded value is written as, so
    that it comes back exactly as it was (a tool's output with its keys unsorted). Written
    by pydantic-core, which reads it back (``NaN`` and ``Infinity`` as Python's ``json``
    writes them; a float is written in the shortest form that reads back the same, which
    may differ from Python's: ``0.000012`` for ``1.2e-05``). Fingerprints use
    :func:`canonical_json`, whose bytes never change."""
    return to_json(value, inf_nan_mode="constants")


def read_json(data: bytes) -> Any:
    """``json.loads(data)``: the same value, read by pydantic-core when it can (several times
    faster); what pydantic-core refuses and ``json`` reads (a lone surrogate, a byte-order
    mark, UTF-16 or UTF-32, nesting deeper than pydantic-core's limit) is read by ``json``.
    pydantic-core accepts no text that ``json`` refuses, and reads every number and string
    it accepts to the same value (checked by ``tests/unit/test_hashing.py``); an error is a
    ``ValueError`` (``json``'s own, or a ``UnicodeDecodeError``)."""
    try:
        return from_json(data)
    except ValueError:
        return json.loads(data)


def fingerprint(value: Any) -> str:
    return sha256_bytes(canonical_json(value))
