"""Masking a Redis capture (see :mod:`sandbox.services.masking`): restored into a scratch
database of the same server, the values of the keys a target's pattern matches changed (a
``null`` target deletes them), captured again and the scratch database emptied."""

from __future__ import annotations

import contextlib
from typing import Any

import redis

from sandbox.errors import ServiceError
from sandbox.services.base import CapturedState, ServiceKind
from sandbox.services.masking import Masker, MaskRule, masked_state
from sandbox.services.redis.touched import DOC_KEY

REDIS_SCRATCH_DB = 14


def mask_redis(
    kind: ServiceKind, endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker
) -> CapturedState:
    base = endpoint.rsplit("/", 1)[0] if endpoint.count("/") > 2 else endpoint.rstrip("/")
    scratch = f"{base}/{REDIS_SCRATCH_DB}"
    if scratch == endpoint:
        raise ServiceError(f"redis database {REDIS_SCRATCH_DB} is the masking scratch database")
    from sandbox.services.redis import RedisKind, is_rdb, parse_dump

    touched = None if is_rdb(state.data) else parse_dump(state.data).get(DOC_KEY)
    if isinstance(kind, RedisKind):
        kind._restore(scratch, state.data, confine=False)  # the live server stays as it is
    else:
        kind.restore(scratch, state.data)
    client: redis.Redis = redis.Redis.from_url(scratch, decode_responses=False)
    try:
        for rule in rules:
            for raw in client.scan_iter(match=rule.target.encode()):
                kind_of = client.type(raw)
                if rule.method == "null":
                    client.delete(raw)
                elif kind_of == b"string":
                    new = m.apply_bytes(rule.method, client.get(raw))
                    client.set(raw, new, keepttl=True)
                elif kind_of == b"hash":
                    for field, value in client.hgetall(raw).items():
                        client.hset(raw, field, m.apply_field(rule.method, field, value))
        masked = kind.capture(scratch) if touched is None else _touched(scratch, state, touched)
    finally:
        with contextlib.suppress(redis.RedisError):
            client.flushdb()
        client.close()
    return masked_state(masked, rules)


def _touched(scratch: str, state: CapturedState, touched: Any) -> CapturedState:
    """A touched capture masked: the same keys (still the list the replay confines to), key
    by key, with the capture's meta."""
    from sandbox.services.redis import _connect, _dump_entries, _server_version, keys_capture

    with _connect(scratch) as client:
        entries, now = _dump_entries(client)
        version = _server_version(client)
    db = int(str(state.meta.get("database", 0)))
    return keys_capture(entries, now, db, version, state.meta, extra={DOC_KEY: touched})
