"""Sandbox bring-up. ``python -m bench.bringup [--rounds N] [--quick]``

1. From warm images to a ready Postgres + Redis pair: our ``bring_up`` (private internal
   network, labels, libfaketime, *and* a small captured state restored into each service,
   then a restore point marked) against testcontainers starting the same two images with
   the same tmpfs mounts, memory, pid and CPU limits, user and command (published ports, no
   restore), each waited for with the same readiness probes. Teardown is timed on neither
   side. Goal: ours within 1.5x of the bare start.
2. Between runs: ``env.reset()`` (after the agent's writes, which are not timed) against a
   fresh bring-up of the same state. Goal: reset at least 10x faster.

Both comparisons warm up each side once, then alternate the sides over the rounds
(:func:`bench.compare.compare`). Needs a Docker engine and the images (``make images``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import psycopg
import redis

from bench.compare import compare, ratios, record
from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.images import image_tag
from sandbox.containers.sizing import size_for, state_bytes
from sandbox.containers.specs import container_spec
from sandbox.services import get_kind

QUICK = ["--quick"]
FROZEN = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)


def _wait(ready: Callable[[str], bool], url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready(url):
        if time.monotonic() > deadline:
            raise TimeoutError(url)
        time.sleep(0.05)


def _bare_start(data: dict[str, bytes]) -> float:
    """Start both images with testcontainers, configured as the sandbox configures them
    (tmpfs, limits, user, command), and wait until both answer; the seconds it took."""
    from testcontainers.core.container import DockerContainer

    start = time.perf_counter()
    containers = []
    try:
        for kind in ("postgres", "redis"):
            spec = container_spec(kind)
            size = size_for(spec.storage, state_bytes(None, len(data[kind])))
            builder = (
                DockerContainer(image_tag(spec.image))
                .with_exposed_ports(spec.port)
                .with_kwargs(
                    user=spec.user,
                    mem_limit=size.mem_limit,
                    pids_limit=spec.pids_limit,
                    nano_cpus=int(spec.cpus * 1e9),
                    cap_drop=["ALL"],
                    read_only=True,
                    security_opt=["no-new-privileges"],
                )
            )
            if spec.command:
                builder.with_command(list(spec.command))
            for path, options in {**spec.tmpfs, **size.tmpfs(spec.storage)}.items():
                builder.with_tmpfs_mount(path, options)
            containers.append((spec, builder.start()))
        for spec, container in containers:
            host = container.get_container_host_ip()
            port = int(container.get_exposed_port(spec.port))
            _wait(spec.ready, spec.url(host, port, spec.default_database))
        return time.perf_counter() - start
    finally:
        for _, container in containers:
            container.stop()


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


def _services(data: dict[str, bytes]) -> list[RestoreSpec]:
    return [
        RestoreSpec("db", "postgres", database="shop", data=data["postgres"], version="15"),
        RestoreSpec("cache", "redis", data=data["redis"]),
    ]


def _ours(data: dict[str, bytes]) -> float:
    """Bring the pair up with its state restored; the seconds until it is ready."""
    start = time.perf_counter()
    env = bring_up(_services(data), frozen_at=FROZEN)
    up = time.perf_counter() - start
    env.close()
    return up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.bringup")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    connect().close()
    pg_data, rd_data = small_states()
    data = {"postgres": pg_data, "redis": rd_data}
    print(f"state: postgres dump {len(pg_data)} B, redis dump {len(rd_data)} B")
    ours, bare = compare(lambda: _ours(data), lambda: _bare_start(data), rounds=rounds)
    record(
        "bring-up: ours (restore, faketime, network) / bare testcontainers start",
        ratios(ours, bare),
        goal="<= 1.5x",
        holds=lambda r: r <= 1.5,
    )
    with bring_up(_services(data), frozen_at=FROZEN) as env:

        def reset() -> float:
            with psycopg.connect(env.env["DATABASE_URL"], autocommit=True) as conn:
                conn.execute("DELETE FROM orders WHERE id % 2 = 0")
            redis.Redis.from_url(env.env["REDIS_URL"]).flushdb()
            start = time.perf_counter()
            env.reset()
            return time.perf_counter() - start

        resets, fresh = compare(reset, lambda: _ours(data), rounds=rounds)
    record(
        "bring-up: fresh bring-up / reset between runs",
        ratios(fresh, resets),
        goal=">= 10x",
        holds=lambda r: r >= 10,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
