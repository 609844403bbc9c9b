"""The contract every service kind keeps: one test runs each kind through the same steps.

set up -> capture -> mutate -> restore -> same hash; mark -> mutate -> reset -> same hash;
two captures of one state -> one hash; a restore elsewhere -> the same hash; the description
(describe) changes with every mutation, comes back with a restore, and describe_data of a
capture equals the describe of the state it was captured from.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import psycopg
import pymysql
import pytest
import redis as redis_client
from test_services_containers import create_database, postgres_server, redis_server
from toy_kind import MemoHarness, memo_registered

from sandbox.containers import RestoreSpec, bring_up
from sandbox.services import get_kind, kind_names
from sandbox.services.mysql.endpoint import Endpoint


class Harness(Protocol):
    def new_endpoint(self) -> str: ...
    def populate(self, endpoint: str) -> None: ...
    def mutate(self, endpoint: str, step: int) -> None: ...


class PostgresHarness:
    def __init__(self, server: str) -> None:
        self.server = server
        self.names = (f"contract_{i}" for i in itertools.count())

    def new_endpoint(self) -> str:
        return create_database(self.server, next(self.names))

    def populate(self, endpoint: str) -> None:
        with psycopg.connect(endpoint, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE item (id serial PRIMARY KEY, name text NOT NULL, price numeric,"
                " created_at timestamptz NOT NULL DEFAULT now())"
            )
            conn.execute("INSERT INTO item (name, price) VALUES ('a', 1.5), ('b', NULL), ('c', 3)")
            conn.execute("CREATE SEQUENCE ticket START 10")
            for _ in range(3):
                conn.execute("SELECT nextval('ticket')")

    def mutate(self, endpoint: str, step: int) -> None:
        with psycopg.connect(endpoint, autocommit=True) as conn:
            if step % 2:
                conn.execute("SELECT nextval('ticket')")
            else:
                conn.execute("INSERT INTO item (name) VALUES ('mutant')")
                conn.execute("UPDATE item SET price = 99 WHERE name = 'a'")


class RedisHarness:
    def __init__(self, server: str) -> None:
        self.server = server
        self.dbs = itertools.count(1)

    def new_endpoint(self) -> str:
        endpoint = f"{self.server}/{next(self.dbs)}"
        redis_client.Redis.from_url(endpoint).flushdb()
        return endpoint

    def populate(self, endpoint: str) -> None:
        r = redis_client.Redis.from_url(endpoint)
        r.set("greeting", "hello")
        r.set("session", "abc", ex=3600)
        r.hset("user:1", mapping={"name": "ada", "plan": "pro"})
        r.rpush("queue", "x", "y", "z")
        r.sadd("tags", "red", "green")
        r.zadd("scores", {"ada": 3.5, "bob": 1})
        r.expire("scores", 600)

    def mutate(self, endpoint: str, step: int) -> None:
        r = redis_client.Redis.from_url(endpoint)
        if step % 2:
            r.persist("session")  # only the TTL changes
        else:
            r.rpush("queue", "extra")
            r.delete("tags")
            r.set("new", "key")


class MySQLHarness:
    def __init__(self, server: str) -> None:
        self.server = Endpoint.parse(server)
        self.names = (f"contract_{i}" for i in itertools.count())

    def _connect(self, endpoint: str) -> pymysql.Connection:  # type: ignore[type-arg]
        ep = Endpoint.parse(endpoint)
        return pymysql.connect(
            host=ep.host, port=ep.port, user=ep.user, database=ep.database, autocommit=True
        )

    def new_endpoint(self) -> str:
        name = next(self.names)
        conn = pymysql.connect(host=self.server.host, port=self.server.port, user="root")
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
            cur.execute(f"CREATE DATABASE {name}")
        conn.close()
        return self.server.with_database(name).url()

    def populate(self, endpoint: str) -> None:
        with self._connect(endpoint) as conn, conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE item (id int AUTO_INCREMENT PRIMARY KEY, name varchar(40) NOT NULL,"
                " price decimal(8,2), created_at timestamp(6) NOT NULL"
                " DEFAULT CURRENT_TIMESTAMP(6), due date, blob_ varbinary(8), total int AS"
                " (CHAR_LENGTH(name)) STORED)"
            )
            cur.execute(
                "INSERT INTO item (name, price, due, blob_) VALUES ('a', 1.5, '2024-03-01',"
                " x'00ff'), ('b', NULL, NULL, NULL), ('c', 3, NULL, '')"
            )
            cur.execute("CREATE TABLE note (body text)")  # no primary key
            cur.execute("INSERT INTO note VALUES ('same'), ('same'), ('ünïcode')")

    def mutate(self, endpoint: str, step: int) -> None:
        with self._connect(endpoint) as conn, conn.cursor() as cur:
            if step % 2:  # only the AUTO_INCREMENT counter moves
                cur.execute("INSERT INTO item (name) VALUES ('gone')")
                cur.execute("DELETE FROM item WHERE name = 'gone'")
            else:
                cur.execute("INSERT INTO item (name) VALUES ('mutant')")
                cur.execute("UPDATE item SET price = 99 WHERE name = 'a'")


class SQLiteHarness:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names = (folder / f"db{i}.sqlite" for i in itertools.count())

    def new_endpoint(self) -> str:
        path = next(self.names)
        sqlite3.connect(path).close()
        return str(path)

    def populate(self, endpoint: str) -> None:
        with sqlite3.connect(endpoint) as conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT, b BLOB)")
            conn.executemany("INSERT INTO t (v, b) VALUES (?, ?)", [("a", b"\x00"), ("b", None)])
        conn.close()

    def mutate(self, endpoint: str, step: int) -> None:
        with sqlite3.connect(endpoint) as conn:
            if step % 2:
                conn.execute("UPDATE t SET v = 'changed' WHERE id = 1")
            else:
                conn.execute("INSERT INTO t (v) VALUES ('mutant')")
        conn.close()


class FilesHarness:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names = (folder / f"ws{i}" for i in itertools.count())

    def new_endpoint(self) -> str:
        path = next(self.names)
        path.mkdir()
        return str(path)

    def populate(self, endpoint: str) -> None:
        root = Path(endpoint)
        (root / "src" / "pkg").mkdir(parents=True)
        (root / "src" / "pkg" / "mod.py").write_text("X = 1\n")
        (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
        os.chmod(root / "run.sh", 0o755)
        (root / "empty").mkdir()

    def mutate(self, endpoint: str, step: int) -> None:
        root = Path(endpoint)
        if step % 2:
            os.chmod(root / "run.sh", 0o644)  # only a mode changes
        else:
            (root / "src" / "pkg" / "mod.py").write_text("X = 2\n")
            (root / "notes.txt").write_text("new\n")
            (root / "empty").rmdir()


KINDS = ["files", "sqlite", pytest.param("postgres", marks=pytest.mark.docker)]
KINDS.append(pytest.param("redis", marks=pytest.mark.docker))
KINDS.append(pytest.param("memo", marks=pytest.mark.docker))  # the toy kind of toy_kind.py
KINDS.append(pytest.param("mysql", marks=pytest.mark.docker))


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def mysql_server() -> Iterator[str]:
    """A MariaDB server brought up by the sandbox from the kind's own descriptor."""
    with bring_up([RestoreSpec("contract", "mysql", database="contract")]) as env:
        yield env.services["contract"].url


@pytest.fixture
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    kind = request.param
    if kind == "postgres":
        yield PostgresHarness(request.getfixturevalue("pg_server"))
    elif kind == "redis":
        yield RedisHarness(request.getfixturevalue("redis_url"))
    elif kind == "sqlite":
        yield SQLiteHarness(tmp_path)
    elif kind == "files":
        yield FilesHarness(tmp_path)
    elif kind == "mysql":
        yield MySQLHarness(request.getfixturevalue("mysql_server"))
    elif kind == "memo":
        with memo_registered():
            yield MemoHarness(request.getfixturevalue("redis_url"))
    else:
        raise AssertionError(f"no contract harness for service kind {kind!r}")


def test_every_registered_kind_is_in_the_contract() -> None:
    covered = {p if isinstance(p, str) else p.values[0] for p in KINDS}
    with memo_registered():
        assert set(kind_names()) == covered


@pytest.mark.parametrize("harness", KINDS, indirect=True)
def test_service_kind_contract(harness: Harness, request: pytest.FixtureRequest) -> None:
    kind = get_kind(request.node.callspec.params["harness"])
    endpoint = harness.new_endpoint()
    harness.populate(endpoint)
    original = kind.state_hash(endpoint)

    captured = kind.capture(endpoint)
    assert captured.state_hash == original
    assert kind.capture(endpoint).state_hash == original, "two captures, one state, one hash"
    assert kind.state_hash(endpoint) == original, "hashing twice gives the same hash"
    described = kind.describe(endpoint)
    assert kind.describe(endpoint) == described, "describing twice gives the same description"

    for step in (0, 1):
        harness.mutate(endpoint, step)
        assert kind.state_hash(endpoint) != original, f"mutation {step} changes the hash"
        assert kind.describe(endpoint) != described, f"mutation {step} changes the description"
        assert kind.describe_data(endpoint, captured.data) == described, "describe a capture"
        kind.restore(endpoint, captured.data)
        assert kind.state_hash(endpoint) == original, f"restore after mutation {step}"
        assert kind.describe(endpoint) == described, f"restore after mutation {step}"

    kind.mark_restore_point(endpoint)
    for step in (0, 1, 0):
        harness.mutate(endpoint, step)
        assert kind.state_hash(endpoint) != original
        kind.reset(endpoint)
        assert kind.state_hash(endpoint) == original, f"reset after mutation {step}"

    elsewhere = harness.new_endpoint()
    kind.restore(elsewhere, captured.data)
    assert kind.state_hash(elsewhere) == original, "a restore elsewhere gives the same hash"
    assert kind.capture(elsewhere).state_hash == original
