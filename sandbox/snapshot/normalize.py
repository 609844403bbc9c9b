"""Normalized requests and their fingerprints, shared by capture (which records them) and
replay (which matches against them).

A request is a JSON-like value. Normalization removes what changes from one run to the next
without changing the meaning (request ids, timestamps, SDK telemetry headers, idempotency keys),
sorts mappings, and lower-cases header names. Two requests with the same normalized form get
the same fingerprint.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sandbox.snapshot.hashing import fingerprint

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


def normalize(value: Any, extra_volatile: frozenset[str] = frozenset()) -> Any:
    """Return ``value`` without volatile keys, with mappings sorted and tuples as lists."""
    if isinstance(value, dict):
        drop = VOLATILE_KEYS | extra_volatile if extra_volatile else VOLATILE_KEYS
        return {
            str(k): normalize(v, extra_volatile)
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
            if str(k).lower() not in drop
        }
    if isinstance(value, list | tuple):
        return [normalize(v, extra_volatile) for v in value]
    return value


def normalize_url(url: str) -> str:
    """Sort query parameters and drop volatile ones; keep scheme, host, path."""
    parts = urlsplit(url)
    query = sorted((k, v) for k, v in parse_qsl(parts.query) if k.lower() not in VOLATILE_KEYS)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def request_fingerprint(kind: str, name: str, request: Any) -> str:
    """The fingerprint of a boundary request: kind, name and the normalized request."""
    return fingerprint({"kind": kind, "name": name, "request": normalize(request)})
