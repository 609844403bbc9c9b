"""Masking rules applied inside captured service state (real Postgres and Redis in
containers): deterministic, so joins still match, and the masked dump restores."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import redis
from test_services_containers import create_database, postgres_server, redis_server

from sandbox.errors import UnknownNameError
from sandbox.services.dumptext import dump_places
from sandbox.services.masking import capture_masked
from sandbox.services.registry import get_kind

KEY = bytes(range(32))
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
EMAILS = ("ana@example.com", "bo@example.org")

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def pg() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="module")
def rd() -> Iterator[str]:
    with redis_server() as url:
        yield url


def _shop(server: str) -> str:
    endpoint = create_database(server, "shop")
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, email text UNIQUE, name text)")
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, email text, total int)")
        conn.execute("CREATE TABLE api_keys (id int PRIMARY KEY, value text)")
        conn.execute("INSERT INTO users VALUES (1, %s, 'Ana'), (2, %s, 'Bo')", EMAILS)
        conn.execute(
            "INSERT INTO orders VALUES (1, %s, 10), (2, %s, 20), (3, %s, 5)",
            (EMAILS[0], EMAILS[0], EMAILS[1]),
        )
        conn.execute("INSERT INTO api_keys VALUES (1, %s)", (AWS_KEY,))
    return endpoint


def test_postgres_columns_are_masked_deterministically_and_the_dump_restores(pg: str) -> None:
    endpoint = _shop(pg)
    mask = {"users.email": "hash", "public.orders.email": "hash", "api_keys.value": "null"}
    state = capture_masked("postgres", endpoint, mask, KEY)
    text = "\n".join(t for _, t in dump_places(state.media_type, state.data))
    for secret in (*EMAILS, AWS_KEY):
        assert secret not in text and secret.encode() not in state.data
    assert state.meta["masked"] == sorted(mask)
    assert state.meta["database"] == "shop"

    target = create_database(pg, "shop_restored")
    get_kind("postgres").restore(target, state.data)
    with psycopg.connect(target) as conn:
        users = conn.execute("SELECT id, email, name FROM users ORDER BY id").fetchall()
        joined = conn.execute(
            "SELECT u.id, count(*) FROM users u JOIN orders o ON o.email = u.email "
            "GROUP BY u.id ORDER BY u.id"
        ).fetchall()
        keys = conn.execute("SELECT value FROM api_keys").fetchall()
    assert [u[2] for u in users] == ["Ana", "Bo"]  # columns without a rule are kept
    assert all(str(u[1]).startswith("mask_") for u in users)
    assert joined == [(1, 2), (2, 1)]  # the same mask for the same e-mail: joins still match
    assert keys == [(None,)]
    assert get_kind("postgres").state_hash(target) == state.state_hash
    # Deterministic: capturing again gives the same masked values and hash.
    assert capture_masked("postgres", endpoint, mask, KEY).state_hash == state.state_hash
    with psycopg.connect(f"{pg}/postgres") as conn:  # the scratch database is gone
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()]
    assert not [n for n in names if n.endswith("_sbx_mask")]


def test_redis_values_are_masked_by_key_pattern(rd: str) -> None:
    endpoint = f"{rd}/0"
    client = redis.Redis.from_url(endpoint)
    client.flushdb()
    client.set("session:1", f"user={EMAILS[0]} token=ghp_{'a1B2' * 9}")
    client.set("session:2", "anonymous")
    client.hset("profile:1", mapping={"email": EMAILS[1], "plan": "pro"})
    client.set("cart:1", "3 items")
    # Unmasked, the dump holds them base64-encoded and LZF-compressed: the scan decodes them.
    plain = get_kind("redis").capture(endpoint)
    assert f"ghp_{'a1B2' * 9}".encode() not in plain.data
    texts = [t for _, t in dump_places(plain.media_type, plain.data)]
    assert any(f"ghp_{'a1B2' * 9}" in t for t in texts)
    mask = {"session:*": "redact", "profile:*": "hash"}
    state = capture_masked("redis", endpoint, mask, KEY)
    for secret in (EMAILS[0], EMAILS[1], f"ghp_{'a1B2' * 9}"):
        assert secret.encode() not in state.data

    restored = f"{rd}/3"
    get_kind("redis").restore(restored, state.data)
    back = redis.Redis.from_url(restored, decode_responses=True)
    assert back.get("cart:1") == "3 items" and back.get("session:2") == "anonymous"
    session = back.get("session:1") or ""
    assert session.startswith("user=<email:") and "token=<redacted:" in session
    assert str(back.hget("profile:1", "plan")).startswith("mask_")
    assert client.get("session:1") is not None  # the live service is untouched
    assert redis.Redis.from_url(f"{rd}/14").dbsize() == 0  # the scratch database is emptied


def test_an_unknown_method_names_the_valid_ones(pg: str) -> None:
    with pytest.raises(UnknownNameError, match="hash, null, redact"):
        capture_masked("postgres", _shop(pg), {"users.email": "shuffle"}, KEY)
