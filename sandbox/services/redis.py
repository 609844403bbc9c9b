"""The ``redis`` service kind: every key of one database with its value and TTL.

Endpoint: ``redis://[:password@]host:port/db`` (``rediss://`` works too).

The captured data is a JSON document (never pickle): each key, its ``DUMP`` payload in base64
and its remaining time to live in milliseconds at capture (``null`` when it has none)::

    {"format": "sandbox-replayer/redis-dump", "format_version": 1, "redis_version": "7.0.15",
     "keys": [{"key": "<base64>", "dump": "<base64>", "pttl": 5000}, ...]}

A restore runs ``FLUSHDB`` then ``RESTORE key ttl payload`` for each key, so a key that had
5 s left at capture has 5 s left after the restore (TTLs are relative to the restore).

The state hash covers, for every key in byte order, its type, its logical value (a list in
order, a set sorted, a sorted set in score order with its scores, a hash sorted by field, a
stream's entries) and **whether it has a TTL**, not the TTL itself: remaining TTLs tick, and
even rounded to the second they change between two reads, so two hashes of one state would
differ.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import redis
from pydantic import JsonValue

from sandbox.errors import ServiceError, ServiceVersionError
from sandbox.services.base import DESCRIBE_LIMIT, TRUNCATED, CapturedState, register
from sandbox.snapshot.hashing import canonical_json, fingerprint, sha256_bytes

FORMAT = "sandbox-replayer/redis-dump"
FORMAT_VERSION = 1
MEDIA_TYPE = "application/vnd.sandbox-replayer.redis-dump+json"
_BATCH = 500
SCRATCH_DB = 15
"""Database number :meth:`RedisKind.describe_data` restores into (14 when the endpoint
uses 15)."""


def _b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise ServiceError(f"redis capture: {what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ServiceError(f"redis capture: {what} is not valid base64") from None


def _where(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"


@contextmanager
def _connect(endpoint: str) -> Iterator[redis.Redis]:
    try:
        client = redis.Redis.from_url(endpoint, decode_responses=False, socket_timeout=30)
    except ValueError as exc:
        raise ServiceError(f"invalid redis endpoint: {exc}") from None
    try:
        client.ping()
        yield client
    except redis.RedisError as exc:
        raise ServiceError(f"redis at {_where(endpoint)}: {exc}") from None
    finally:
        client.close()


def _batches(keys: list[bytes]) -> Iterator[list[bytes]]:
    for i in range(0, len(keys), _BATCH):
        yield keys[i : i + _BATCH]


def _keys(client: redis.Redis) -> list[bytes]:
    return sorted(set(client.scan_iter(count=1000)))


def _server_version(client: redis.Redis) -> str:
    info: dict[str, Any] = client.info("server")
    return str(info.get("redis_version", "unknown"))


def _value(client: redis.Redis, key: bytes, kind: str) -> Any:
    """The logical value of one key as JSON-ready data (bytes in base64)."""
    # redis-py's return types are unions over its client modes; this client returns bytes.
    if kind == "string":
        value: Any = client.get(key)
        return _b64(value or b"")
    if kind == "list":
        items: Any = client.lrange(key, 0, -1)
        return [_b64(v) for v in items]
    if kind == "set":
        members: Any = client.smembers(key)
        return sorted(_b64(v) for v in members)
    if kind == "zset":
        pairs: Any = client.zrange(key, 0, -1, withscores=True)
        return [[_b64(m), repr(float(s))] for m, s in pairs]
    if kind == "hash":
        fields: Any = client.hgetall(key)
        return sorted([_b64(f), _b64(v)] for f, v in fields.items())
    if kind == "stream":
        entries: Any = client.xrange(key, "-", "+")
        return [
            [_b64(entry_id), sorted([_b64(f), _b64(v)] for f, v in body.items())]
            for entry_id, body in entries
        ]
    payload = client.dump(key)  # a module type: its serialized form is the best we have
    return sha256_bytes(payload) if isinstance(payload, bytes) else None


def logical_state(client: redis.Redis) -> list[list[Any]]:
    state: list[list[Any]] = []
    for batch in _batches(_keys(client)):
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.type(key)
            pipe.pttl(key)
        answers = pipe.execute()
        for i, key in enumerate(batch):
            kind = answers[2 * i].decode() if isinstance(answers[2 * i], bytes) else "none"
            if kind == "none":  # expired or deleted since the scan
                continue
            state.append([_b64(key), kind, _value(client, key, kind), answers[2 * i + 1] >= 0])
    return state


def _text(data: bytes | str) -> JsonValue:
    """Bytes as text when they are UTF-8, else as ``{"base64": ...}``."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": _b64(data)}


def _readable(kind: str, value: Any) -> JsonValue:
    """A :func:`_value` (base64 inside) made readable with :func:`_text`."""

    def t(item: Any) -> JsonValue:
        return _text(base64.b64decode(item))

    if kind == "string":
        return t(value)
    if kind in ("list", "set"):
        return [t(v) for v in value]
    if kind == "zset":
        return [[t(m), float(s) if math.isfinite(float(s)) else s] for m, s in value]
    if kind == "hash":
        return {str(_key_text(base64.b64decode(f))): t(v) for f, v in value}
    if kind == "stream":
        return [
            [t(entry_id), {str(_key_text(base64.b64decode(f))): t(v) for f, v in body}]
            for entry_id, body in value
        ]
    return {"sha256": value}


def _key_text(data: bytes) -> str:
    """A key or field as a dictionary key: its text, or ``base64:...`` when not UTF-8."""
    text = _text(data)
    return text if isinstance(text, str) else "base64:" + _b64(data)


def describe_state(client: redis.Redis, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
    """``{"keys": {key: {"type", "value", "has_ttl"}}}`` for the first ``limit`` keys in byte
    order; with more keys, ``"truncated": {"keys": total}``."""
    keys = _keys(client)
    out: dict[str, JsonValue] = {}
    described: dict[str, JsonValue] = {}
    for key in keys[:limit]:
        kind_raw: Any = client.type(key)
        kind = kind_raw.decode() if isinstance(kind_raw, bytes) else "none"
        if kind == "none":
            continue
        pttl: Any = client.pttl(key)
        described[_key_text(key)] = {
            "type": kind,
            "value": _readable(kind, _value(client, key, kind)),
            "has_ttl": bool(pttl >= 0),
        }
    out["keys"] = described
    if len(keys) > limit:
        out[TRUNCATED] = {"keys": len(keys)}
    return out


def _hash(client: redis.Redis) -> str:
    return fingerprint({"kind": "redis", "keys": logical_state(client)})


def parse_dump(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ServiceError("not a redis capture: the data is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ServiceError(f"not a redis capture made by sandbox-replayer (format {FORMAT!r})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise ServiceError(
            f"redis capture has format version {doc.get('format_version')!r}, this "
            f"sandbox-replayer reads version {FORMAT_VERSION}"
        )
    if not isinstance(doc.get("keys"), list):
        raise ServiceError("redis capture has no list of keys")
    return doc


class RedisKind:
    """Capture with ``DUMP``/``PTTL``, restore with ``FLUSHDB``/``RESTORE``."""

    name: ClassVar[str] = "redis"

    def __init__(self) -> None:
        self._points: dict[str, bytes] = {}

    def capture(self, endpoint: str) -> CapturedState:
        with _connect(endpoint) as client:
            version = _server_version(client)
            entries = []
            for batch in _batches(_keys(client)):
                pipe = client.pipeline(transaction=True)  # a key's DUMP and PTTL agree
                for key in batch:
                    pipe.dump(key)
                    pipe.pttl(key)
                answers = pipe.execute()
                for i, key in enumerate(batch):
                    payload, pttl = answers[2 * i], answers[2 * i + 1]
                    if payload is None or pttl == -2:  # expired since the scan
                        continue
                    entries.append(
                        {
                            "key": _b64(key),
                            "dump": _b64(payload),
                            "pttl": pttl if pttl >= 0 else None,
                        }
                    )
            state_hash = _hash(client)
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "redis_version": version,
            "keys": entries,
        }
        return CapturedState(
            data=canonical_json(doc),
            state_hash=state_hash,
            version=version,
            media_type=MEDIA_TYPE,
            meta={"keys": len(entries)},
        )

    def restore(self, endpoint: str, data: bytes) -> None:
        doc = parse_dump(data)
        entries = []
        for i, entry in enumerate(doc["keys"]):
            if not isinstance(entry, dict):
                raise ServiceError(f"redis capture: key entry {i} is not an object")
            pttl = entry.get("pttl")
            if pttl is not None and (not isinstance(pttl, int) or pttl < 0):
                raise ServiceError(f"redis capture: key entry {i} has an invalid pttl {pttl!r}")
            # PTTL 0 means "about to expire"; RESTORE with 0 would mean "never".
            ttl = 0 if pttl is None else max(pttl, 1)
            key = _unb64(entry.get("key"), f"key entry {i}")
            entries.append((key, ttl, _unb64(entry.get("dump"), f"payload of key entry {i}")))
        with _connect(endpoint) as client:
            client.flushdb()
            for start in range(0, len(entries), _BATCH):
                pipe = client.pipeline(transaction=False)
                for key, ttl, payload in entries[start : start + _BATCH]:
                    pipe.restore(key, ttl, payload, replace=True)
                try:
                    pipe.execute()
                except redis.ResponseError as exc:
                    dumped, target = doc.get("redis_version"), _server_version(client)
                    if "payload version" in str(exc):
                        raise ServiceVersionError(
                            f"the redis capture comes from redis {dumped} but {_where(endpoint)} "
                            f"runs redis {target}, which cannot read its DUMP payloads ({exc}): "
                            f"restore it into a redis {dumped} or newer image"
                        ) from None
                    raise ServiceError(f"redis restore into {_where(endpoint)}: {exc}") from None

    def state_hash(self, endpoint: str) -> str:
        with _connect(endpoint) as client:
            return _hash(client)

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """See :func:`describe_state`."""
        with _connect(endpoint) as client:
            return describe_state(client, limit)

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """Restore ``data`` into database :data:`SCRATCH_DB` of the same server, describe it,
        flush it."""
        parts = urlsplit(endpoint)
        current = (parts.path or "/0").strip("/") or "0"
        number = SCRATCH_DB if current != str(SCRATCH_DB) else SCRATCH_DB - 1
        scratch = urlunsplit(parts._replace(path=f"/{number}"))
        try:
            self.restore(scratch, data)
            return self.describe(scratch, limit=limit)
        finally:
            with _connect(scratch) as client:
                client.flushdb()

    def mark_restore_point(self, endpoint: str) -> None:
        """Keep a capture of the database in memory."""
        self._points[endpoint] = self.capture(endpoint).data

    def reset(self, endpoint: str) -> None:
        try:
            data = self._points[endpoint]
        except KeyError:
            raise ServiceError(
                f"no restore point for redis at {_where(endpoint)}: call mark_restore_point first"
            ) from None
        self.restore(endpoint, data)


register(RedisKind())
