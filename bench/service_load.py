"""The refund service (:mod:`examples.refund_service`) under load, capture on with
``keep="failed"`` against capture off: throughput and p99 latency ratios.

Postgres and Redis run in containers, the payment gateway in-process (slow on the first
charge of one order in ten: those requests pay twice and are the runs kept). Each round
serves the same fresh orders once with capture on and once with it off (the side that goes
first alternates), ``--clients`` concurrent clients sending ``--requests`` requests, each
side stopped after ``--seconds`` (throughput counts the requests answered by then). Goals:
throughput at least 0.9x, p99 at most 1.2x. ``make bench`` runs it (no quick mode).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable

import psycopg
import redis

from bench.compare import record
from examples import refund_load, refund_service
from sandbox.containers import RestoreSpec, bring_up
from sandbox.snapshot.store import DirectoryStore


def _reset(database_url: str, redis_url: str, requests: int) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("TRUNCATE refunds RESTART IDENTITY")
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()
    refund_service.setup(database_url, requests)


def _side(
    capture_on: bool, orders: list[str], clients: int, seconds: float
) -> Callable[[], refund_load.Load]:
    def run() -> refund_load.Load:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as store:
            app = refund_service.create_app(capture_on=capture_on, store=store)
            with refund_load.serve(app) as base:
                load = refund_load.load(base, orders, clients, seconds)
            kept = len(DirectoryStore(store).list()) if capture_on else 0
        print(
            f"  capture {'on ' if capture_on else 'off'}: {load.answered} answered "
            f"{load.statuses}, "
            f"{load.throughput:.1f} req/s, p99 {load.quantile(0.99) * 1000:.0f} ms"
            + (f", {kept} runs kept" if capture_on else ""),
            flush=True,
        )
        return load

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.service_load", description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=120.0, help="cap per side")
    args = parser.parse_args(argv)
    specs = [
        RestoreSpec(name="db", kind="postgres", env="DATABASE_URL"),
        RestoreSpec(name="cache", kind="redis", env="REDIS_URL"),
    ]
    saved = {k: os.environ.get(k) for k in ("DATABASE_URL", "REDIS_URL", "PAYMENTS_URL")}
    url, stop = refund_load.gateway(refund_service.GATEWAY_TIMEOUT * 2)
    throughput: list[float] = []
    p99: list[float] = []
    try:
        with bring_up(specs) as env:
            db, cache = env.services["db"].url, env.services["cache"].url
            os.environ.update(DATABASE_URL=db, REDIS_URL=cache, PAYMENTS_URL=url)
            refund_service.setup(db, args.requests)
            for i in range(args.rounds):
                loads: dict[bool, refund_load.Load] = {}
                for capture_on in (True, False) if i % 2 == 0 else (False, True):
                    _reset(db, cache, args.requests)
                    # fresh order ids per round and side: the gateway is slow on a first charge
                    orders = [f"o-{n}" for n in range(1, args.requests + 1)]
                    prefix = f"r{i}{'c' if capture_on else 'n'}-"
                    with psycopg.connect(db, autocommit=True) as conn, conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO orders (id, cents) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                            [(prefix + o, 100) for o in orders],
                        )
                    named = [prefix + o for o in orders]
                    loads[capture_on] = _side(capture_on, named, args.clients, args.seconds)()
                throughput.append(loads[True].throughput / loads[False].throughput)
                p99.append(loads[True].quantile(0.99) / loads[False].quantile(0.99))
    finally:
        stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    record(
        f"service throughput, capture on (keep=failed) / off, {args.clients} clients",
        throughput,
        goal=">= 0.9x",
        holds=lambda m: m >= 0.9,
    )
    record(
        f"service p99 latency, capture on (keep=failed) / off, {args.clients} clients",
        p99,
        goal="<= 1.2x",
        holds=lambda m: m <= 1.2,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
