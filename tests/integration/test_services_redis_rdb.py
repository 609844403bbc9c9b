"""Redis captured as the server's RDB snapshot, loaded by a sandbox at start, reset by
reloading it: against real servers (a sandbox's and a plain one), on small data."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from test_services_containers import redis_server

from sandbox.containers import Environment, RestoreSpec, bring_up
from sandbox.services import get_kind
from sandbox.services.redis import MEDIA_TYPE, RDB_MEDIA_TYPE, parse_dump, unpack_rdb

pytestmark = pytest.mark.docker

HOUR_MS = 3_600_000


def _fill(client: redis.Redis) -> None:
    client.flushall()
    client.mset({f"k:{i}": f"v{i}" for i in range(300)})
    client.hset("h", mapping={"a": "1", "b": "2"})
    client.rpush("l", "1", "2", "3")
    client.sadd("s", *[str(i) for i in range(200)])
    client.zadd("z", {"a": 1.25, "b": -3})


@pytest.fixture(scope="module")
def source() -> Iterator[Environment]:
    """A sandbox server to capture from (no state of its own)."""
    with bring_up([RestoreSpec("src", "redis")]) as env:
        yield env


@pytest.fixture
def src(source: Environment) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(source.env["REDIS_URL"])
    _fill(client)
    yield client
    client.close()


def test_capture_is_the_servers_rdb_and_byte_stable_without_ttls(
    source: Environment, src: redis.Redis
) -> None:
    kind = get_kind("redis")
    url = source.env["REDIS_URL"]
    first, second = kind.capture(url), kind.capture(url)
    assert first.media_type == RDB_MEDIA_TYPE
    header, rdb = unpack_rdb(first.data)
    assert rdb.startswith(b"REDIS") and b"ctime" not in rdb and b"used-mem" not in rdb
    assert header["keys"] == 304 and header["expiring"] == 0 and header["captured_ms"] is None
    assert first.data == second.data, "an unchanged keyspace gives the same blob"
    src.set("k:0", "changed")
    assert kind.capture(url).state_hash != first.state_hash
    src.set("k:0", "v0")
    src.expire("h", 60)
    third, fourth = kind.capture(url), kind.capture(url)
    assert third.state_hash != first.state_hash, "TTL presence is part of the state"
    assert unpack_rdb(third.data)[1] == unpack_rdb(fourth.data)[1], "expiry times are absolute"
    assert unpack_rdb(third.data)[0]["expiring"] == 1


def test_hash_from_the_snapshot_matches_the_hash_from_dump_payloads(
    source: Environment, src: redis.Redis
) -> None:
    """A user the server refuses ``SYNC`` gets a key-by-key capture with the same hash."""
    kind = get_kind("redis")
    url = source.env["REDIS_URL"]
    src.acl_setuser(
        "nosync", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-sync"]
    )
    limited = url.replace("redis://", "redis://nosync:pw@")
    by_keys, by_rdb = kind.capture(limited), kind.capture(url)
    assert by_keys.media_type == MEDIA_TYPE and by_rdb.media_type == RDB_MEDIA_TYPE
    assert len(parse_dump(by_keys.data)["keys"]) == 304
    assert by_keys.state_hash == by_rdb.state_hash
    assert kind.state_hash(limited) == kind.state_hash(url) == by_rdb.state_hash


def test_another_database_with_keys_makes_a_key_by_key_capture(
    source: Environment, src: redis.Redis
) -> None:
    url = source.env["REDIS_URL"]
    other = redis.Redis.from_url(url.rsplit("/", 1)[0] + "/4")
    other.set("neighbour", "1")
    captured = get_kind("redis").capture(url)
    assert captured.media_type == MEDIA_TYPE
    assert b"neighbour" not in captured.data and len(parse_dump(captured.data)["keys"]) == 304
    other.close()


def test_a_sandbox_loads_the_snapshot_and_resets_by_reloading_it(
    source: Environment, src: redis.Redis
) -> None:
    src.set("ttl", "x", px=HOUR_MS)
    kind = get_kind("redis")
    captured = kind.capture(source.env["REDIS_URL"])
    at = datetime.now(UTC)
    with bring_up([RestoreSpec("cache", "redis", data=captured.data)], frozen_at=at) as env:
        client = redis.Redis.from_url(env.env["REDIS_URL"])
        persistence = client.info("persistence")
        assert persistence["rdb_last_load_keys_loaded"] == 305, "loaded from the file"
        code, listing = env.exec("cache", ["ls", "/data"])
        assert code == 0 and listing.split() == ["dump.rdb"]
        assert kind.state_hash(env.env["REDIS_URL"]) == captured.state_hash
        assert HOUR_MS - 60_000 < client.pttl("ttl") <= HOUR_MS
        assert client.lrange("l", 0, -1) == [b"1", b"2", b"3"]

        client.set("k:1", "changed")
        client.delete("ttl", "h")
        client.set("extra", "1")
        assert kind.state_hash(env.env["REDIS_URL"]) != captured.state_hash
        env.reset()
        assert client.get("k:1") == b"v1" and client.get("extra") is None
        assert client.hgetall("h") == {b"a": b"1", b"b": b"2"}
        assert HOUR_MS - 60_000 < client.pttl("ttl") <= HOUR_MS, "the TTL of the restore point"
        assert kind.state_hash(env.env["REDIS_URL"]) == captured.state_hash
        client.close()


def test_a_clock_past_a_keys_expiry_restores_key_by_key_with_its_ttl(
    source: Environment, src: redis.Redis
) -> None:
    """Loaded as it is, the file would drop a key whose expiry the sandbox clock has passed:
    the key is written with the TTL it had at capture instead."""
    src.set("ttl", "x", px=HOUR_MS)
    captured = get_kind("redis").capture(source.env["REDIS_URL"])
    later = datetime.now(UTC) + timedelta(days=2)
    with bring_up([RestoreSpec("cache", "redis", data=captured.data)], frozen_at=later) as env:
        client = redis.Redis.from_url(env.env["REDIS_URL"])
        assert client.info("persistence")["rdb_last_load_keys_loaded"] == 0
        assert client.dbsize() == 305
        assert HOUR_MS - 60_000 < client.pttl("ttl") <= HOUR_MS
        client.delete("ttl")
        env.reset()
        assert HOUR_MS - 60_000 < client.pttl("ttl") <= HOUR_MS
        client.close()


def test_describe_data_and_restore_of_a_snapshot_into_another_database(
    source: Environment, src: redis.Redis
) -> None:
    kind = get_kind("redis")
    url = source.env["REDIS_URL"]
    captured = kind.capture(url)
    described = kind.describe_data(url, captured.data, limit=5)
    keys = described["keys"]
    assert isinstance(keys, dict) and len(keys) == 5
    assert described["truncated"] == {"keys": 304}
    with redis_server() as plain:
        kind.restore(f"{plain}/2", captured.data)
        assert kind.state_hash(f"{plain}/2") == captured.state_hash
        assert kind.describe(f"{plain}/2") == kind.describe(url)


def test_a_database_with_a_stream_keeps_key_by_key_capture(
    source: Environment, src: redis.Redis
) -> None:
    src.xadd("events", {"a": "1"}, id="1-0")
    kind = get_kind("redis")
    captured = kind.capture(source.env["REDIS_URL"])
    assert captured.media_type == MEDIA_TYPE
    assert parse_dump(captured.data)["hash_version"] == 1
    with bring_up([RestoreSpec("cache", "redis", data=captured.data)]) as env:
        assert kind.state_hash(env.env["REDIS_URL"]) == captured.state_hash
