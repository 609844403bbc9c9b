"""Masking a Redis capture (see :mod:`sandbox.services.masking`): restored into a scratch
database of the same server, the values of the keys a target's pattern matches changed (a
``null`` target deletes them), captured again and the scratch database emptied."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import redis

from sandbox.errors import ServiceError
from sandbox.services.base import CapturedState, ServiceKind
from sandbox.services.masking import Masker, MaskRule, masked_state

REDIS_SCRATCH_DB = 14


def mask_redis(
    kind: ServiceKind,
    endpoint: str,
    state: CapturedState,
    rules: list[MaskRule],
    m: Masker,
    *,
    restore: Callable[[str, bytes], None] | None = None,
    recapture: Callable[[str], CapturedState] | None = None,
) -> CapturedState:
    """``restore`` and ``recapture`` (default: the kind's ``restore`` and ``capture``) put
    the capture into the scratch database and take it back masked."""
    base = endpoint.rsplit("/", 1)[0] if endpoint.count("/") > 2 else endpoint.rstrip("/")
    scratch = f"{base}/{REDIS_SCRATCH_DB}"
    if scratch == endpoint:
        raise ServiceError(f"redis database {REDIS_SCRATCH_DB} is the masking scratch database")
    (restore or kind.restore)(scratch, state.data)
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
        masked = (recapture or kind.capture)(scratch)
    finally:
        with contextlib.suppress(redis.RedisError):
            client.flushdb()
        client.close()
    return masked_state(masked, rules)
