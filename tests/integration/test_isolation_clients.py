"""Every common client is seen where it connects and goes where the router says: the agent
asks for a host that does not exist, the router sends it to a real Postgres or Redis, and the
query answers from there. psycopg 3 (sync and async), psycopg2, asyncpg, SQLAlchemy over
psycopg and psycopg2, redis-py (sync and asyncio)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import redis
from test_services_containers import create_database, postgres_server, redis_server

from sandbox.capture import clients

NOWHERE_PG = "postgresql://agent:s3cret@db.nowhere.invalid:6543/shop"
NOWHERE_REDIS = "redis://:s3cret@cache.nowhere.invalid:7777/0"


@pytest.fixture(scope="module")
def targets() -> Iterator[tuple[str, str]]:
    with postgres_server() as pg, redis_server() as rd:
        database = create_database(pg, "shop")
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("CREATE TABLE marker (v text)")
            conn.execute("INSERT INTO marker VALUES ('the sandbox')")
        client = redis.Redis.from_url(f"{rd}/0")
        client.set("marker", "the sandbox")
        client.close()
        yield database, f"{rd}/0"


def _psycopg() -> Any:
    with psycopg.connect(NOWHERE_PG, connect_timeout=3) as conn:
        return conn.execute("SELECT v FROM marker").fetchone()[0]  # type: ignore[index]


def _psycopg_async() -> Any:
    async def go() -> Any:
        conn = await psycopg.AsyncConnection.connect(NOWHERE_PG, connect_timeout=3)
        async with conn:
            cur = await conn.execute("SELECT v FROM marker")
            return (await cur.fetchone())[0]  # type: ignore[index]

    return asyncio.run(go())


def _psycopg2() -> Any:
    import psycopg2

    conn = psycopg2.connect(
        host="db.nowhere.invalid", port=6543, user="agent", password="s3cret", dbname="shop"
    )
    try:
        cur = conn.cursor()
        cur.execute("SELECT v FROM marker")
        return cur.fetchone()[0]
    finally:
        conn.close()


def _asyncpg() -> Any:
    import asyncpg

    async def go() -> Any:
        conn = await asyncpg.connect(NOWHERE_PG, timeout=3)
        try:
            return await conn.fetchval("SELECT v FROM marker")
        finally:
            await conn.close()

    return asyncio.run(go())


def _sqlalchemy(driver: str) -> Callable[[], Any]:
    def go() -> Any:
        import sqlalchemy

        url = NOWHERE_PG.replace("postgresql://", f"postgresql+{driver}://")
        engine = sqlalchemy.create_engine(url)
        try:
            with engine.connect() as conn:
                return conn.execute(sqlalchemy.text("SELECT v FROM marker")).scalar()
        finally:
            engine.dispose()

    return go


def _redis() -> Any:
    client = redis.Redis.from_url(NOWHERE_REDIS, socket_timeout=3)
    try:
        return client.get("marker").decode()  # type: ignore[union-attr]
    finally:
        client.close()


def _redis_async() -> Any:
    import redis.asyncio

    async def go() -> Any:
        client = redis.asyncio.Redis(host="cache.nowhere.invalid", port=7777, password="s3cret")
        try:
            return (await client.get("marker")).decode()
        finally:
            await client.aclose()

    return asyncio.run(go())


CASES: dict[str, tuple[Callable[[], Any], str, str]] = {
    "psycopg": (_psycopg, "postgres", "psycopg"),
    "psycopg-async": (_psycopg_async, "postgres", "psycopg"),
    "psycopg2": (_psycopg2, "postgres", "psycopg2"),
    "asyncpg": (_asyncpg, "postgres", "asyncpg"),
    "sqlalchemy-psycopg": (_sqlalchemy("psycopg"), "postgres", "psycopg"),
    "sqlalchemy-psycopg2": (_sqlalchemy("psycopg2"), "postgres", "psycopg2"),
    "redis": (_redis, "redis", "redis"),
    "redis-asyncio": (_redis_async, "redis", "redis.asyncio"),
}


@pytest.mark.docker
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_client_is_seen_and_goes_where_the_router_says(
    case: str, targets: tuple[str, str]
) -> None:
    run, kind, client = CASES[case]
    database, cache = targets
    seen: list[clients.Connect] = []

    def router(connect: clients.Connect) -> str:
        seen.append(connect)
        return database if connect.kind == "postgres" else cache

    undo = clients.install(router)
    try:
        assert run() == "the sandbox"
    finally:
        undo()
    assert seen, "the client's connection was not seen"
    first = seen[0]
    assert (first.kind, first.client) == (kind, client)
    host, port = (
        ("db.nowhere.invalid", 6543) if kind == "postgres" else ("cache.nowhere.invalid", 7777)
    )
    assert clients.endpoint_key(kind, first.endpoint).startswith(f"{kind}://{host}:{port}/")
    assert "s3cret" in first.endpoint  # the router gets the credentials, in memory
