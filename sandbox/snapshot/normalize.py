"""Normalized requests and their fingerprints, shared by capture (which records them) and
replay (which matches against them).

A request is a JSON-like value. Normalization removes what changes from one run to the next
without changing the meaning (request ids, timestamps, SDK telemetry headers, idempotency keys),
sorts mappings, and lower-cases header names. Two requests with the same normalized form get
the same fingerprint.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sandbox.snapshot.hashing import canonical_json

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


_LEAVES = frozenset({str, int, float, bool, type(None)})
"""Types whose values normalize to themselves."""


def normalize(value: Any, extra_volatile: frozenset[str] = frozenset()) -> Any:
    """Return ``value`` without volatile keys, with mappings sorted (by their keys as
    strings; of two keys with the same string the later stays) and tuples as lists."""
    if isinstance(value, dict):
        drop = VOLATILE_KEYS | extra_volatile if extra_volatile else VOLATILE_KEYS
        items = []
        strings = True
        for k, v in value.items():
            if type(k) is str:
                key = k
            else:
                key = str(k)
                strings = False
            if key.lower() not in drop:
                items.append((key, v if type(v) in _LEAVES else normalize(v, extra_volatile)))
        if strings:
            items.sort()  # keys of one dict, all strings: distinct, no value is compared
        else:
            items.sort(key=_first)  # stable: keys with the same string keep their order
        return dict(items)
    if isinstance(value, list | tuple):
        return [v if type(v) in _LEAVES else normalize(v, extra_volatile) for v in value]
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
    (:func:`~sandbox.snapshot.hashing.fingerprint` of them, in one call)."""
    value = {"kind": kind, "name": name, "request": normalize(request)}
    return hashlib.sha256(canonical_json(value)).hexdigest()
