"""The redis service kind against a real server: every type, TTLs, clear errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from test_services_containers import redis_server

from sandbox.errors import ServiceError, ServiceVersionError
from sandbox.services import get_kind
from sandbox.services.redis import FORMAT, parse_dump

pytestmark = pytest.mark.docker

TTL_KEYS = {"s:ttl", "h:ttl", "l:ttl", "z:ttl", "stream"}
PLAIN_KEYS = {"s:plain", "h:plain", "l:plain", "set:plain", "z:plain", b"bin\xff\x00key"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture
def endpoint(server: str) -> Iterator[str]:
    url = f"{server}/3"
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.set("s:plain", "v")
    client.set("s:ttl", "v", ex=3600)
    client.hset("h:plain", mapping={"a": "1", "b": "2"})
    client.hset("h:ttl", mapping={"a": "1"})
    client.expire("h:ttl", 3600)
    client.rpush("l:plain", "1", "2", "3")
    client.rpush("l:ttl", "x")
    client.pexpire("l:ttl", 3_600_000)
    client.sadd("set:plain", "a", "b", "c")
    client.zadd("z:plain", {"a": 1.25, "b": -3, "c": 1e300})
    client.zadd("z:ttl", {"a": 1})
    client.expire("z:ttl", 3600)
    client.xadd("stream", {"event": "start"}, id="1-0")
    client.xadd("stream", {"event": "stop", "at": "2"}, id="2-0")
    client.expire("stream", 3600)
    client.set(b"bin\xff\x00key", b"\x00\x01\xfe")
    client.close()
    yield url


def test_restore_brings_back_values_and_ttls(endpoint: str) -> None:
    kind = get_kind("redis")
    captured = kind.capture(endpoint)
    assert captured.version is not None and captured.version.startswith("7.")
    doc = parse_dump(captured.data)
    assert len(doc["keys"]) == len(TTL_KEYS | PLAIN_KEYS)

    client = redis.Redis.from_url(endpoint)
    client.flushdb()
    kind.restore(endpoint, captured.data)

    assert kind.state_hash(endpoint) == captured.state_hash
    for key in TTL_KEYS:
        assert 0 < client.pttl(key) <= 3_600_000, key
    for key in PLAIN_KEYS:
        assert client.pttl(key) == -1, key
    assert client.lrange("l:plain", 0, -1) == [b"1", b"2", b"3"]
    assert client.zrange("z:plain", 0, -1, withscores=True) == [
        (b"b", -3),
        (b"a", 1.25),
        (b"c", 1e300),
    ]
    assert client.xrange("stream") == [
        (b"1-0", {b"event": b"start"}),
        (b"2-0", {b"event": b"stop", b"at": b"2"}),
    ]
    assert client.get(b"bin\xff\x00key") == b"\x00\x01\xfe"
    client.close()


def test_restore_replaces_everything_in_the_db_only(endpoint: str, server: str) -> None:
    kind = get_kind("redis")
    captured = kind.capture(endpoint)
    other = redis.Redis.from_url(f"{server}/4")
    other.set("neighbour", "stays")
    client = redis.Redis.from_url(endpoint)
    client.set("intruder", "1")
    client.set("s:plain", "changed")
    kind.restore(endpoint, captured.data)
    assert client.get("intruder") is None and client.get("s:plain") == b"v"
    assert other.get("neighbour") == b"stays"
    client.close()
    other.close()


def test_hash_is_logical(server: str) -> None:
    kind = get_kind("redis")
    a, b = redis.Redis.from_url(f"{server}/5"), redis.Redis.from_url(f"{server}/6")
    for client in (a, b):
        client.flushdb()
    a.sadd("s", *[str(i) for i in range(200)])  # a hashtable set
    a.hset("h", mapping={"x": "1", "y": "2"})
    b.hset("h", mapping={"y": "2", "x": "1"})
    b.sadd("s", *[str(i) for i in reversed(range(200))])
    assert kind.state_hash(f"{server}/5") == kind.state_hash(f"{server}/6")
    b.expire("h", 100)
    assert kind.state_hash(f"{server}/5") != kind.state_hash(f"{server}/6"), "TTL presence"
    a.close()
    b.close()


def test_bad_data_is_a_clear_error(endpoint: str) -> None:
    kind = get_kind("redis")
    with pytest.raises(ServiceError, match="not JSON"):
        kind.restore(endpoint, b"\x80pickle")
    with pytest.raises(ServiceError, match="format version 9"):
        kind.restore(endpoint, json.dumps({"format": FORMAT, "format_version": 9}).encode())
    doc = {"format": FORMAT, "format_version": 1, "redis_version": "99.0.0", "keys": []}
    doc["keys"] = [{"key": "aw==", "dump": "AAAA", "pttl": None}]
    with pytest.raises(ServiceError):
        kind.restore(endpoint, json.dumps(doc).encode())


def test_payload_from_a_newer_redis_names_both_versions(endpoint: str) -> None:
    kind = get_kind("redis")
    captured = parse_dump(kind.capture(endpoint).data)
    entry = captured["keys"][0]
    import base64

    payload = bytearray(base64.b64decode(entry["dump"]))
    # The two bytes before the 8-byte CRC are the RDB version: claim a future one.
    payload[-10:-8] = (200).to_bytes(2, "little")
    entry["dump"] = base64.b64encode(bytes(payload)).decode()
    captured["redis_version"] = "99.0.0"
    with pytest.raises(ServiceVersionError, match=r"redis 99\.0\.0.*runs redis 7\."):
        kind.restore(endpoint, json.dumps(captured).encode())


def test_reset_without_mark_is_an_error(server: str) -> None:
    with pytest.raises(ServiceError, match="mark_restore_point"):
        get_kind("redis").reset(f"{server}/9")


def test_describe_values_and_a_recorded_dump(endpoint: str, server: str) -> None:
    kind = get_kind("redis")
    described = kind.describe(endpoint)
    keys = described["keys"]
    assert isinstance(keys, dict)
    assert set(keys) == {k if isinstance(k, str) else "base64:Ymlu/wBrZXk=" for k in PLAIN_KEYS} | (
        TTL_KEYS
    )
    assert keys["s:ttl"] == {"type": "string", "value": "v", "has_ttl": True}
    assert keys["h:plain"] == {"type": "hash", "value": {"a": "1", "b": "2"}, "has_ttl": False}
    assert keys["l:plain"] == {"type": "list", "value": ["1", "2", "3"], "has_ttl": False}
    assert keys["z:plain"] == {
        "type": "zset",
        "value": [["b", -3.0], ["a", 1.25], ["c", 1e300]],
        "has_ttl": False,
    }
    assert keys["base64:Ymlu/wBrZXk="] == {
        "type": "string",
        "value": {"base64": "AAH+"},
        "has_ttl": False,
    }
    assert kind.describe(endpoint, limit=2)["truncated"] == {"keys": len(keys)}

    data = kind.capture(endpoint).data
    client = redis.Redis.from_url(endpoint)
    client.delete("s:plain")
    client.rpush("l:plain", "4")
    client.close()
    assert kind.describe_data(endpoint, data) == described
    assert kind.describe(endpoint) != described
    scratch = redis.Redis.from_url(f"{server}/15")
    assert scratch.dbsize() == 0
    scratch.close()
