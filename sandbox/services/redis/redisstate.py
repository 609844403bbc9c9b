"""The logical state of a Redis database read from an RDB (see
:mod:`sandbox.services.redis.rdbfile`): its hash, and the commands that write it into a database.

Hash version 2 (captures made as RDB snapshots): the sum, modulo 2**128, of an XXH3-128
digest of every key's canonical record: the key, its type, whether it has a TTL, and its
value (a list in order, a set sorted, a hash sorted by field, a sorted set by score then
member). A sum needs no sort and no order: two servers holding the same keys give the same
hash whatever their encodings or hash-table order. The TTL itself is left out, as in
version 1: it ticks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis
import xxhash

from sandbox.services.redis.rdbfile import Key
from sandbox.snapshot.hashing import fingerprint

HASH_VERSION = 2
_MOD = 1 << 128
_BATCH = 500


def _items(values: Iterable[bytes]) -> bytes:
    return b"".join(b"%d:%b" % (len(v), v) for v in values)


def record(key: Key) -> bytes:
    """The canonical bytes of one key (see the module doc)."""
    head = b"%d:%b%b%d" % (len(key.key), key.key, key.type[:2].encode(), key.expires_ms is not None)
    value = key.value
    if key.type == "string":
        return head + bytes(value)
    if key.type == "list":
        return head + _items(value)
    if key.type == "set":
        return head + _items(sorted(value))
    if key.type == "hash":
        return head + _items(b for pair in sorted(value.items()) for b in pair)
    pairs = sorted((score, member) for member, score in value)
    return head + _items(b for s, m in pairs for b in (m, repr(float(s)).encode()))


@dataclass(frozen=True)
class Summary:
    state_hash: str
    keys: int
    expiries: list[int]
    """The expiry time (ms) of every key that has one."""


def summarize(keys: Iterable[Key], db: int) -> Summary | None:
    """The hash (version 2) of database ``db`` holding ``keys``, its key count and expiry
    times; ``None`` when a key of another database comes."""
    found = accumulate(keys, db)
    return None if found is None else finish(*found)


def accumulate(keys: Iterable[Key], db: int) -> tuple[int, int, list[int]] | None:
    """The sum of the records' digests, the key count and the expiry times of ``keys``
    (see :func:`summarize`)."""
    h = xxhash.xxh3_128_intdigest
    total = count = 0
    expiries = []
    for key in keys:
        if key.db != db:
            return None
        name = key.key
        if key.type == "string":  # the common case, inlined
            total += h(b"%d:%bst%d%b" % (len(name), name, key.expires_ms is not None, key.value))
        else:
            total += h(record(key))
        count += 1
        if key.expires_ms is not None:
            expiries.append(key.expires_ms)
    return total, count, expiries


def finish(total: int, count: int, expiries: list[int]) -> Summary:
    """The summary of keys whose records' digests sum to ``total``."""
    state = {"kind": "redis", "hash_version": HASH_VERSION, "keys": count}
    state["sum"] = f"{total % _MOD:032x}"
    return Summary(fingerprint(state), count, expiries)


def write(client: redis.Redis, keys: Iterable[Key], captured_ms: int | None) -> None:
    """Write ``keys`` into the client's database with ordinary commands, each TTL set
    relative to now as it was relative to ``captured_ms`` (at least 1 ms)."""
    pipe = client.pipeline(transaction=False)
    pending = 0
    for key in keys:
        _write_one(pipe, key)
        if key.expires_ms is not None:
            left = key.expires_ms - (captured_ms if captured_ms is not None else key.expires_ms)
            pipe.pexpire(key.key, max(left, 1))
        pending += 1
        if pending >= _BATCH:
            pipe.execute()
            pending = 0
    pipe.execute()


def _write_one(pipe: Any, key: Key) -> None:
    name, value = key.key, key.value
    if key.type == "string":
        pipe.set(name, value)
    elif key.type == "list":
        pipe.rpush(name, *value)
    elif key.type == "set":
        pipe.sadd(name, *value)
    elif key.type == "hash":
        pipe.hset(name, mapping=value)
    else:
        pipe.zadd(name, {member: score for member, score in value})
