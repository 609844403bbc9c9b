"""Services found, not declared, and a replay that touches only the sandbox.

A zero-code agent (``sandbox capture --services auto -- python agent.py``) reads its Postgres
and Redis addresses from its own config file (no variable the replayer could repoint), inserts
an order and overwrites a cache key in a *live* Postgres and Redis started for the test. Its
replays must reproduce the failure while the live databases stay byte-for-byte as they were.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from test_services_containers import create_database, postgres_server, redis_server

from cli.main import main
from sandbox.snapshot.store import DirectoryStore

AGENT = textwrap.dedent(
    """
    import json, sys
    import psycopg, redis

    config = json.load(open(sys.argv[1]))
    db = psycopg.connect(config["database"], autocommit=True)
    cache = redis.Redis.from_url(config["cache"])
    cache.set("last_order", "order-from-agent")
    cache.incr("orders:count")
    before = db.execute("SELECT count(*) FROM orders WHERE sku = 'sku-1'").fetchone()[0]
    db.execute("INSERT INTO orders (sku) VALUES ('sku-1')")
    if before >= 1:
        raise RuntimeError(f"duplicate order for sku-1 ({before} already placed)")
    """
)


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str]]:
    """A live Postgres database and a live Redis: the user's own, not the sandbox's."""
    with postgres_server() as pg, redis_server() as rd:
        yield pg, rd


def _seed(live: tuple[str, str]) -> tuple[str, str]:
    pg, rd = live
    database = create_database(pg, "shop")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id serial PRIMARY KEY, sku text NOT NULL)")
        conn.execute("INSERT INTO orders (sku) VALUES ('sku-1'), ('sku-2')")
    cache = f"{rd}/0"
    client = redis.Redis.from_url(cache)
    client.flushall()
    client.set("last_order", "order-1")
    client.set("orders:count", 2)
    client.hset("customer:7", mapping={"name": "Ada", "tier": "gold"})
    client.close()
    return database, cache


def _live_state(database: str, cache: str) -> dict[str, Any]:
    """Every row of every table, and every key with its type, TTL and DUMP bytes."""
    with psycopg.connect(database) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        rows = {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall() for t in tables}
        sequences = conn.execute("SELECT last_value FROM orders_id_seq").fetchone()
    client = redis.Redis.from_url(cache)
    keys = {
        key: (client.type(key), client.pttl(key), client.dump(key))
        for key in sorted(client.keys("*"))
    }
    client.close()
    return {"rows": rows, "sequence": sequences, "keys": keys}


def _capture(tmp_path: Path, database: str, cache: str, services: str) -> tuple[Path, str]:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"database": database, "cache": cache}))
    store = tmp_path / "store"
    code = main(
        [
            "capture",
            "--name",
            "shop",
            "--store",
            str(store),
            "--services",
            services,
            "--",
            sys.executable,
            str(agent),
            str(config),
        ]
    )
    assert code == 1
    (run,) = DirectoryStore(store).list()
    return store, run.run_id


@pytest.mark.docker
def test_found_services_are_captured_and_replays_leave_the_live_ones_unchanged(
    live: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database, cache = _seed(live)
    store, run_id = _capture(tmp_path, database, cache, "auto")
    manifest = DirectoryStore(store).load_manifest(run_id)
    assert {(s.name, s.kind) for s in manifest.services} == {
        ("postgres", "postgres"),
        ("redis", "redis"),
    }
    assert all(s.before is not None and s.after is not None for s in manifest.services)
    assert sorted((t.kind, t.clients, t.service) for t in manifest.touched) == [
        ("postgres", ["psycopg"], "postgres"),
        ("redis", ["redis"], "redis"),
    ]
    capsys.readouterr()
    assert main(["show", run_id, "--store", str(store)]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # the console may wrap lines
    assert f"touched postgres {database} via psycopg: captured as postgres" in shown
    assert "via psycopg: captured as postgres" in shown
    assert "via redis: captured as redis" in shown

    before = _live_state(database, cache)
    assert len(before["rows"]["orders"]) == 3  # the capture itself ran against the live ones

    times = 3
    code = main(["replay", run_id, "--times", str(times), "--json", "--store", str(store)])
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{\n") :])
    assert code == 1, report["notes"]
    assert report["verdict"]["reproduced"] == times and report["verdict"]["total"] == times
    assert report["refused"] == []
    assert _live_state(database, cache) == before


@pytest.mark.docker
def test_services_recorded_but_not_captured_are_refused_on_replay(
    live: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database, cache = _seed(live)
    store, run_id = _capture(tmp_path, database, cache, "none")
    manifest = DirectoryStore(store).load_manifest(run_id)
    assert manifest.services == []
    assert sorted((t.kind, t.service) for t in manifest.touched) == [
        ("postgres", None),
        ("redis", None),
    ]
    before = _live_state(database, cache)
    capsys.readouterr()
    code = main(["replay", run_id, "--json", "--store", str(store)])
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{\n") :])
    assert code == 2
    assert report["verdict"]["reproduced"] == 0
    (line,) = report["refused"]
    assert "replay refused a postgres connection (psycopg) to 127.0.0.1:" in line
    assert "--services none" in line
    assert "--live 'http:127.0.0.1:" in line
    assert _live_state(database, cache) == before
