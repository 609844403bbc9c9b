"""Normalized requests and their fingerprints, shared by capture (which records them) and
replay (which matches against them).

A request is a JSON-like value. Normalization removes what changes from one run to the next
without changing the meaning (request ids, timestamps, SDK telemetry headers, idempotency keys),
sorts mappings, and lower-cases header names. Two requests with the same normalized form get
the same fingerprint.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic_core import to_json

from sandbox.snapshot.hashing import canonical_json, sha256_bytes

VOLATILE_KEYS = frozenset(
    {
        "request_id",
        "requestid",
        "x-request-id",
        "idempotency-key",
        "idempotency_key",
        "timestamp",
        "ts",
        "date",
        "user-agent",
        "traceparent",
        "tracestate",
        "x-stainless-retry-count",
        "x-stainless-read-timeout",
        "x-stainless-timeout",
        "x-stainless-os",
        "x-stainless-arch",
        "x-stainless-runtime",
        "x-stainless-runtime-version",
        "x-stainless-package-version",
        "x-stainless-lang",
        "x-stainless-async",
        "content-length",
        "accept-encoding",
        "connection",
        "host",
        "authorization",
        "x-api-key",
        "api-key",
        "cookie",
    }
)
"""Keys dropped anywhere in a request (compared case-insensitively)."""


_PLAIN = frozenset({str, int, bool, type(None)})
"""Leaf types that normalize to themselves and that ``json`` and pydantic-core write alike."""


def normalize(value: Any, extra_volatile: frozenset[str] = frozenset()) -> Any:
    """Return ``value`` without volatile keys, with mappings sorted (by their keys as
    strings; of two keys with the same string the later stays) and tuples as lists."""
    return _normalize(
        value, VOLATILE_KEYS | extra_volatile if extra_volatile else VOLATILE_KEYS, []
    )


def _normalize(value: Any, drop: frozenset[str], odd: list[Any]) -> Any:
    """:func:`normalize` without the keys in ``drop``; every leaf that is not of a
    :data:`_PLAIN` type (a float, an object) is added to ``odd``."""
    if isinstance(value, dict):
        items = []
        strings = True
        for k, v in value.items():
            if type(k) is str:
                key = k
            else:
                key = str(k)
                strings = False
            if key.lower() not in drop:
                items.append((key, v if type(v) in _PLAIN else _normalize(v, drop, odd)))
        if strings:
            items.sort()  # keys of one dict, all strings: distinct, no value is compared
        else:
            items.sort(key=_first)  # stable: keys with the same string keep their order
        return dict(items)
    if isinstance(value, list | tuple):
        return [v if type(v) in _PLAIN else _normalize(v, drop, odd) for v in value]
    if type(value) not in _PLAIN:
        odd.append(value)
    return value


def _first(item: tuple[str, Any]) -> str:
    return item[0]


@functools.lru_cache(maxsize=1024)
def normalize_url(url: str) -> str:
    """Sort query parameters and drop volatile ones; keep scheme, host, path (remembered
    for the last thousand URLs: an agent calls the same few again and again)."""
    parts = urlsplit(url)
    query = sorted((k, v) for k, v in parse_qsl(parts.query) if k.lower() not in VOLATILE_KEYS)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def request_fingerprint(kind: str, name: str, request: Any) -> str:
    """The fingerprint of a boundary request: kind, name and the normalized request
    (:func:`~sandbox.snapshot.hashing.fingerprint` of them: the SHA-256 of their
    :func:`~sandbox.snapshot.hashing.canonical_json`)."""
    odd: list[Any] = []
    value = {"kind": kind, "name": name, "request": _normalize(request, VOLATILE_KEYS, odd)}
    if odd or type(kind) is not str or type(name) is not str:
        return sha256_bytes(canonical_json(value))
    # Only strings, integers, booleans and nulls, mappings sorted already: pydantic-core
    # writes the bytes canonical_json writes (floats it writes in another form), faster.
    try:
        return sha256_bytes(to_json(value))
    except ValueError:  # a lone surrogate: canonical_json's own error, as before
        return sha256_bytes(canonical_json(value))
