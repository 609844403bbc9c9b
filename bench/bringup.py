"""Sandbox bring-up. ``python -m bench.bringup [ROUNDS]``

1. From warm images to a ready Postgres + Redis pair: our ``bring_up`` (private internal
   network, labels, limits, libfaketime, *and* a small captured state restored into each
   service, then a restore point marked) against testcontainers starting the same two
   images with published ports and no restore, each waited for with the same readiness
   probes. Goal: ours within 1.5x of the bare start.
2. Between runs: ``env.reset()`` against a fresh bring-up. Goal: reset at least 10x faster.

Medians over ROUNDS rounds (default 3), alternating the two so that neither gets a warmer
engine. Needs a Docker engine and the images (``make images``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import psycopg
import redis

from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.specs import CONTAINER_KINDS
from sandbox.services import get_kind

FROZEN = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)


def _wait(ready: Callable[[str], bool], url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready(url):
        if time.monotonic() > deadline:
            raise TimeoutError(url)
        time.sleep(0.05)


def testcontainers_pair() -> tuple[float, float]:
    """Start both images with testcontainers, wait until both answer; (up, teardown) s."""
    from testcontainers.core.container import DockerContainer

    pg, rd = CONTAINER_KINDS["postgres"], CONTAINER_KINDS["redis"]
    start = time.perf_counter()
    containers = []
    try:
        for spec in (pg, rd):
            container = DockerContainer(spec.image_tag).with_exposed_ports(spec.port)
            containers.append((spec, container.with_kwargs(user=spec.user).start()))
        for spec, container in containers:
            host = container.get_container_host_ip()
            port = int(container.get_exposed_port(spec.port))
            _wait(spec.ready, spec.url(host, port, spec.default_database))
        up = time.perf_counter() - start
    finally:
        stop = time.perf_counter()
        for _, container in containers:
            container.stop()
    return up, time.perf_counter() - stop


def small_states() -> tuple[bytes, bytes]:
    """A small captured state for each service: a table of 1000 rows, 1000 keys."""
    with bring_up(
        [RestoreSpec("db", "postgres", database="shop"), RestoreSpec("cache", "redis")]
    ) as env:
        with psycopg.connect(env.env["DATABASE_URL"], autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text, at timestamptz)")
            conn.execute(
                "INSERT INTO orders SELECT i, 'item ' || i, now() FROM generate_series(1, 1000) i"
            )
        client = redis.Redis.from_url(env.env["REDIS_URL"])
        client.mset({f"stock:{i}": i for i in range(1000)})
        client.expire("stock:1", 3600)
        return (
            get_kind("postgres").capture(env.env["DATABASE_URL"]).data,
            get_kind("redis").capture(env.env["REDIS_URL"]).data,
        )


def ours_pair(pg_data: bytes, rd_data: bytes, resets: int) -> tuple[float, float, float]:
    """Bring up with restore; time ``resets`` resets; (up, median reset, teardown) s."""
    services = [
        RestoreSpec("db", "postgres", database="shop", data=pg_data, version="15"),
        RestoreSpec("cache", "redis", data=rd_data),
    ]
    start = time.perf_counter()
    env = bring_up(services, frozen_at=FROZEN)
    up = time.perf_counter() - start
    try:
        times = []
        for _ in range(resets):
            with psycopg.connect(env.env["DATABASE_URL"], autocommit=True) as conn:
                conn.execute("DELETE FROM orders WHERE id % 2 = 0")
            redis.Redis.from_url(env.env["REDIS_URL"]).flushdb()
            t = time.perf_counter()
            env.reset()
            times.append(time.perf_counter() - t)
    finally:
        stop = time.perf_counter()
        env.close()
    return up, statistics.median(times), time.perf_counter() - stop


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rounds = int(args[0]) if args else 3
    connect().close()
    pg_data, rd_data = small_states()
    print(f"state: postgres dump {len(pg_data)} B, redis dump {len(rd_data)} B")
    tc_up, tc_down, our_up, our_down, resets = [], [], [], [], []
    for i in range(rounds):
        up, down = testcontainers_pair()
        tc_up.append(up)
        tc_down.append(down)
        up, reset, down = ours_pair(pg_data, rd_data, resets=5)
        our_up.append(up)
        our_down.append(down)
        resets.append(reset)
        print(
            f"round {i + 1}: testcontainers {tc_up[-1]:.2f} s, ours {our_up[-1]:.2f} s, "
            f"reset {reset * 1000:.0f} ms"
        )
    tc, ours, reset = (statistics.median(x) for x in (tc_up, our_up, resets))
    tc_td = statistics.median(tc_down)
    print(f"bare start (testcontainers, no restore): {tc:.2f} s (teardown {tc_td:.2f} s)")
    print(
        f"ours (internal network, faketime, restore): {ours:.2f} s "
        f"(teardown {statistics.median(our_down):.2f} s)"
    )
    print(f"ratio ours / bare start: {ours / tc:.2f}x (goal <= 1.5x)")
    print(
        f"reset: {reset * 1000:.0f} ms; fresh bring-up / reset: {ours / reset:.1f}x (goal >= 10x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
