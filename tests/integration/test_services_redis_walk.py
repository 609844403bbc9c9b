"""The hash walked over a real server's RDB (:mod:`sandbox.services.redis.rdbhash`) equals the
hash of the keys the RDB parser reads, for every encoding Redis writes, however the file
is cut into chunks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from test_services_containers import redis_server

from sandbox.services.redis import rdbfile, rdbhash, redisstate

pytestmark = pytest.mark.docker


def _fill(client: redis.Redis) -> None:
    """Keys in each encoding: raw, integer and compressed strings; listpack and hashtable
    hashes, sets (intset too), sorted sets, quicklists; binary and long names; TTLs."""
    client.flushall()
    client.mset({f"k:{i}": f"v{i}" for i in range(200)})
    client.mset({"int8": "7", "int16": "-3000", "int32": "2000000000", "big": str(1 << 40)})
    client.mset({"empty": "", b"\xff\x00bin": b"\x00\x01", "n" * 70: "long name"})
    client.set("packed", "abc" * 400)  # compressed (LZF) in the RDB
    client.set("long", bytes(range(256)) * 3)
    client.set("ttl", "x", px=3_600_000)
    client.hset("h-small", mapping={"a": "1", "b": "2"})
    client.hset("h-big", mapping={f"f{i}": "y" * (i % 90) for i in range(300)})
    client.hset("ttl-h", mapping={"a": "1"})
    client.pexpire("ttl-h", 3_600_000)
    client.rpush("l-small", "1", "two", "3")
    client.rpush("l-big", *[f"item{i}" * (i % 9) for i in range(3000)])
    client.sadd("s-int", *range(50))
    client.sadd("s-small", "a", "b", "c")
    client.sadd("s-big", *[f"m{i}" for i in range(600)])
    client.zadd("z-small", {"a": 1.25, "b": -3, "c": float("inf")})
    client.zadd("z-big", {f"m{i}": i / 7 for i in range(400)} | {"ninf": float("-inf")})


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with redis_server() as url:
        client = redis.Redis.from_url(f"{url}/0")
        client.config_set("repl-diskless-sync-delay", 0)
        _fill(client)
        client.close()
        yield f"{url}/0"


def _expected(rdb: bytes, db: int, *, strict: bool = True) -> redisstate.Summary | None:
    return redisstate.summarize(rdbfile.keys(rdb) if strict else rdbfile.keys(rdb, db), db)


def _chunked(rdb: bytes, size: int, db: int, *, strict: bool = True) -> redisstate.Summary | None:
    """The walk's summary of ``rdb`` fed ``size`` bytes at a time; the walk must have read
    the whole file itself (no parser fallback)."""
    walk = rdbhash.Walk(db, strict=strict)
    for at in range(0, len(rdb), size):
        walk.feed(rdb[at : at + size])
    found = walk.result(rdb)
    assert walk.walked or found is None
    return found


def test_walked_hash_equals_the_parsed_one_in_every_encoding(server: str) -> None:
    rdb = rdbfile.fetch(server, diskless=False)
    expected = _expected(rdb, 0)
    assert expected is not None and expected.keys == 220 and len(expected.expiries) == 2
    assert rdbhash.summarize(rdbfile.stable(rdb), 0) == expected
    for size in (1, 7, 4096, len(rdb)):
        assert _chunked(rdb, size, 0) == expected, f"cut every {size} bytes"


@pytest.mark.parametrize("diskless", [True, False], ids=["eof-marked", "sized"])
def test_the_hash_walked_while_the_snapshot_comes_is_the_same(server: str, diskless: bool) -> None:
    walk = rdbhash.Walk(0)
    rdb = rdbfile.fetch(server, diskless=diskless, sink=walk.feed)
    assert walk.result(rdb) == _expected(rdb, 0)
    assert walk.walked


def test_another_database_gives_none_or_is_left_out(server: str) -> None:
    other = redis.Redis.from_url(server.rsplit("/", 1)[0] + "/3")
    other.set("neighbour", "1")
    other.hset("nh", mapping={"a": "1"})
    try:
        rdb = rdbfile.fetch(server, diskless=False)
        assert rdbhash.summarize(rdb, 0) is None
        assert _chunked(rdb, 5, 0) is None
        left_out = rdbhash.summarize(rdb, 0, strict=False)
        assert left_out is not None and left_out == _expected(rdb, 0, strict=False)
        assert left_out.keys == 220
        assert _chunked(rdb, 3, 3, strict=False) == _expected(rdb, 3, strict=False)
    finally:
        other.flushdb()
        other.close()


def test_a_stream_is_unreadable_as_for_the_parser(server: str) -> None:
    client = redis.Redis.from_url(server)
    client.xadd("events", {"a": "1"})
    try:
        rdb = rdbfile.fetch(server, diskless=False)
        with pytest.raises(rdbfile.Unreadable):
            _expected(rdb, 0)
        with pytest.raises(rdbfile.Unreadable):
            rdbhash.summarize(rdb, 0)
        with pytest.raises(rdbfile.Unreadable):
            _chunked(rdb, 64, 0)
    finally:
        client.delete("events")
        client.close()
