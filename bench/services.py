"""Benchmark: postgres reset from the restore-point template vs restore from the dump.

Run: ``.venv/bin/python -m bench.services [--rows N] [--repeat K]``. Starts one container
from the local postgres image (removed at the end) and prints medians and ratios, with a
fresh container plus restore as the baseline that a reset replaces.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import docker
import psycopg

from bench.compare import compare, ratios, record
from sandbox.services import get_kind

IMAGE = "sandbox-replayer/postgres:15"
QUICK = ["--repeat", "3"]
LABELS = {"org.sandbox-replayer.managed": "true", "org.sandbox-replayer.bench": "services"}


def _start(client: docker.DockerClient, tmpfs: bool = False) -> tuple[Any, str]:
    """Start postgres; with ``tmpfs`` its data folder lives in memory instead of the
    container's overlay layer (where creating a database's files dominates a reset)."""
    mounts = {}
    if tmpfs:  # owned by the image's postgres user, as initdb wants
        ids = client.containers.run(
            IMAGE, entrypoint=["sh", "-c", "echo $(id -u),$(id -g)"], remove=True, labels=LABELS
        )
        uid, gid = ids.decode().strip().split(",")
        mounts["/var/lib/postgresql/data"] = f"uid={uid},gid={gid},mode=0700"
    container = client.containers.run(
        IMAGE,
        detach=True,
        ports={"5432/tcp": ("127.0.0.1", None)},
        labels=LABELS,
        tmpfs=mounts,
    )
    container.reload()
    port = container.attrs["NetworkSettings"]["Ports"]["5432/tcp"][0]["HostPort"]
    server = f"postgresql://postgres@127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(f"{server}/postgres", connect_timeout=2).close()
            return container, server
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                container.remove(force=True)
                raise
            time.sleep(0.05)


def _populate(server: str, rows: int) -> str:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE bench")
    endpoint = f"{server}/bench"
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE orders (id serial PRIMARY KEY, item text, qty int,"
            " created_at timestamptz DEFAULT now());"
            "CREATE INDEX ON orders (item);"
            "CREATE TABLE events (id bigserial PRIMARY KEY, order_id int, body jsonb);"
        )
        conn.execute(
            "INSERT INTO orders (item, qty)"
            " SELECT 'item' || g, g %% 7 FROM generate_series(1, %s) g",
            (rows,),
        )
        conn.execute(
            "INSERT INTO events (order_id, body) SELECT g, jsonb_build_object('n', g)"
            " FROM generate_series(1, %s) g",
            (rows,),
        )
    return endpoint


def _measure(client: docker.DockerClient, rows: int, repeat: int, tmpfs: bool) -> int:
    """Record, on one storage, restore-from-dump / reset and fresh-container-plus-restore /
    reset (each side after the same untimed DELETE; warm-up, alternation, ``repeat``
    rounds); return the dump's size."""
    kind = get_kind("postgres")
    container, server = _start(client, tmpfs)
    try:
        endpoint = _populate(server, rows)
        captured = kind.capture(endpoint)
        kind.restore(endpoint, captured.data)
        kind.mark_restore_point(endpoint)

        def mutated(step: Callable[[], None]) -> float:
            with psycopg.connect(endpoint, autocommit=True) as conn:
                conn.execute("DELETE FROM events WHERE id % 3 = 0")
            start = time.perf_counter()
            step()
            return time.perf_counter() - start

        def fresh() -> float:
            start = time.perf_counter()
            other, other_server = _start(client, tmpfs)
            try:
                kind.restore(f"{other_server}/bench", captured.data)
                return time.perf_counter() - start
            finally:
                other.remove(force=True)

        def reset() -> float:
            return mutated(lambda: kind.reset(endpoint))

        def restore() -> float:
            return mutated(lambda: kind.restore(endpoint, captured.data))

        where = "tmpfs" if tmpfs else "overlay2"
        resets, restores = compare(reset, restore, rounds=repeat)
        record(f"pg reset ({where}): restore from dump / reset", ratios(restores, resets))
        resets, fresh_s = compare(reset, fresh, rounds=repeat)
        record(
            f"pg reset ({where}): fresh container + restore / reset",
            ratios(fresh_s, resets),
            goal=">= 10x",
            holds=lambda r: r >= 10,
        )
        kind.reset(endpoint)
        if kind.state_hash(endpoint) != captured.state_hash:
            raise RuntimeError("reset did not return to the captured state")
        return len(captured.data)
    finally:
        container.remove(force=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="postgres reset vs restore from dump")
    parser.add_argument("--rows", type=int, default=2000, help="rows in each of 2 tables")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    client = docker.from_env()
    try:
        print(f"postgres, 2 tables x {args.rows} rows, {args.repeat} rounds")
        for tmpfs in (False, True):
            size = _measure(client, args.rows, args.repeat, tmpfs)
        print(f"(dump {size} bytes)")
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
