"""The refund service (:mod:`examples.refund_service`) under load, capture on with
``keep="failed"`` against capture off: throughput and p99 latency ratios.

``python -m bench.service_load [--requests 2000] [--clients 100] [--rounds 4] [--seconds
120] [--warmup 300] [--drain 120] [--declare db,cache]``; ``make bench`` runs it as it is,
``python -m bench.all --quick`` with :data:`QUICK`.

Postgres and Redis run in containers, the payment gateway in a process of its own (slow on
the first charge of one order in ten: those requests pay twice and are the runs kept; as a
payment provider, its answers do not wait for the service's interpreter). Both sides do
the same work: the same app (FastAPI under uvicorn, in this process), started afresh, serves
``--requests`` fresh orders (the same numbers, so the same slow ones) to ``--clients``
concurrent clients, from the same reset state (refunds and orders truncated, the side's
orders inserted, Redis flushed). Each side
is stopped after ``--seconds`` at most. Throughput counts the requests answered, over the
time from the first request to the last answer; p99 is over every request (one still
unanswered at the stop counts with the time it had waited). One warm-up of each side
(``--warmup`` requests) comes first; then rounds in the order on-off, off-on, off-on,
on-off, and so on (:func:`_order`): with an even number of rounds each side goes first in
half of them, and a machine that slows down (or speeds up) steadily over the rounds favours
neither side; the figures are the median of the per-round ratios and their spread.

What each side pays. Capture off: the app alone. Capture on: every request is a run
(:class:`~sandbox.capture.asgi.CaptureMiddleware`, ``keep="failed"``, Postgres and Redis
declared): its events written aside as they happen, its Postgres state pinned (one
snapshot shared by the runs that start within a second), its statements noted at the
psycopg cursors, the Redis keys it touches read at first touch; a run that ends well is
dropped (nothing written). The runs that fail (the slow ones) are finished in the
background while the load goes on, on the same CPUs (the dumps of the tables they touched,
from the pin and after, their keys, blobs and manifest): that is counted. After its load,
the capture-on side waits (up to ``--drain`` seconds, not counted) until its kept runs are
written and checks that they are exactly the requests that paid twice, so no capture work
of one side runs into the next; the next side's reset runs with a lock timeout, so it fails
with a clear message rather than wait.

Each side also prints the process's CPU a request (user and system, all threads: the load's
clients included, the same on both sides), and the machine's: the process's, its child
processes' (a kept run's ``pg_dump``) and the services' containers' (the database's sessions,
the capture's pins and dumps), counted until the kept runs are written; the machine's
cores, not only the interpreter's lock, bound the throughput, and what the capture has the
database do runs on them too. Its ratio, capture on / off, is printed by round and as a
figure (for information: no goal). And what its load cost beyond the requests' own
path: the CPU its
garbage collections took (the interpreter's, whichever thread ran them: a side that
allocates more collects more, and a full collection scans the whole heap) and, for the
capture-on side, the CPU the background thread spent finishing its kept runs
(:func:`sandbox.capture.finisher.spent`), each and per request.

``--declare db``, ``--declare cache`` or ``--declare ""`` has the capture declare only those
services (or none), to see what each one's state capture costs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import redis

from bench import _machine as machine
from bench.compare import record
from examples import refund_load, refund_service
from sandbox import capture
from sandbox.capture import finisher
from sandbox.containers import RestoreSpec, bring_up
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--requests", "1000", "--rounds", "2", "--warmup", "200", "--seconds", "90"]
"""Two rounds: on-off, then off-on."""
LOCK_TIMEOUT = "30s"


def _reset(database_url: str, redis_url: str, orders: list[str]) -> None:
    """Refunds and orders emptied, then ``orders`` inserted (100 cents each), Redis
    flushed: every side of every round starts from the same tables (the orders of the
    sides before do not pile up in the tables a kept run's dumps read)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        try:
            conn.execute("TRUNCATE refunds, orders RESTART IDENTITY")
        except psycopg.errors.LockNotAvailable:
            raise SystemExit(
                f"bench.service_load: the reset waited {LOCK_TIMEOUT} for a lock on refunds "
                "or orders (a session of the side before still holds one)"
            ) from None
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO orders (id, cents) VALUES (%s, 100)",
                [(o,) for o in orders],
            )
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()


@contextlib.contextmanager
def _collections() -> Iterator[dict[str, float]]:
    """The CPU seconds the interpreter's garbage collections take within the block (the
    collecting thread's time, finalizers included), and how many of the oldest
    generation: a side that allocates more collects more, and a full collection scans the
    whole heap."""
    spent = {"seconds": 0.0, "full": 0}
    began = [0.0]

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.thread_time()
        else:
            spent["seconds"] += time.thread_time() - began[0]
            spent["full"] += info["generation"] == 2

    gc.callbacks.append(note)
    try:
        yield spent
    finally:
        gc.callbacks.remove(note)


@dataclass(frozen=True)
class _Side:
    load: refund_load.Load
    machine_ms: float
    """The CPU a request answered took on the machine: this process's, its child processes'
    and the services' containers' (milliseconds)."""


def _side(
    capture_on: bool,
    orders: list[str],
    clients: int,
    seconds: float,
    drain: float,
    containers: machine.Containers,
    declare: Collection[str] = refund_service.SERVICES,
) -> Callable[[], _Side]:
    def run() -> _Side:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as store:
            app = refund_service.create_app(capture_on=capture_on, store=store, declare=declare)
            before = finisher.spent()  # the kept runs of this side, finished during its load too
            began_cpu, began_children = machine.process_cpu(), machine.children_cpu()
            began_services = containers.cpu()
            with _collections() as collected, refund_load.serve(app) as base:
                load = refund_load.load(base, orders, clients, seconds)
            answered = max(load.answered, 1)
            cpu_each = (machine.process_cpu() - began_cpu) / answered * 1000
            extra = (
                f", {cpu_each:.1f} ms of the process's CPU a request, garbage collection "
                f"{collected['seconds']:.1f}s of CPU ({collected['full']:.0f} full)"
            )
            if capture_on:
                began = time.perf_counter()
                if not capture.flush(drain):
                    raise SystemExit(
                        f"bench.service_load: the kept runs were not written within {drain:g}s"
                    )
                kept = DirectoryStore(store).list()
                finished, cpu = finisher.spent()
                finished, cpu = finished - before[0], cpu - before[1]
                paid_twice = _paid_twice(os.environ["DATABASE_URL"])
                extra += (
                    f", {len(kept)} runs kept of {paid_twice} paid twice (all written "
                    f"{time.perf_counter() - began:.1f}s after the load; "
                    f"{cpu / max(finished, 1) * 1000:.0f} ms of CPU each to finish, "
                    f"{cpu / answered * 1000:.1f} ms a request), "
                    + ", ".join(sorted({_told(m) for m in kept}))
                )
            # after the drain: the kept runs' dumps (child processes, the database's work)
            # are counted with the load that made them
            children_each = (machine.children_cpu() - began_children) / answered * 1000
            services = containers.cpu()
            services_each = {
                name: (used - began_services[name]) / answered * 1000
                for name, used in services.items()
            }
            machine_ms = cpu_each + children_each + sum(services_each.values())
            extra += f"; child processes {children_each:.1f} ms a request, " + ", ".join(
                f"{name} {each:.1f} ms" for name, each in sorted(services_each.items())
            )
            extra += f": {machine_ms:.1f} ms of the machine's CPU a request"
        print(
            f"  capture {'on ' if capture_on else 'off'}: {load.answered} answered "
            f"{load.statuses} in {load.seconds:.1f}s, {load.throughput:.1f} req/s, "
            f"p50 {load.quantile(0.5) * 1000:.0f} ms, p99 {load.quantile(0.99) * 1000:.0f} ms"
            + extra,
            flush=True,
        )
        return _Side(load, machine_ms)

    return run


def _order(round_index: int) -> tuple[bool, bool]:
    """Whether capture is on for the first and the second side of round ``round_index``
    (from 0): on-off, off-on, off-on, on-off, then again. Over rounds 0-3 each side runs
    first twice and second twice, and in each pair of rounds (0-1, 2-3) once at each place."""
    on_first = round_index % 4 in (0, 3)
    return (True, False) if on_first else (False, True)


def _paid_twice(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM (SELECT order_id FROM refunds GROUP BY order_id "
            "HAVING count(*) > 1) twice"
        ).fetchone()
    return int(row[0]) if row else 0


def _told(manifest: object) -> str:
    """How a kept run's Postgres state was captured, in a few words."""
    for service in getattr(manifest, "services", []):
        if service.kind == "postgres":
            told = service.meta.get("told_by", "?")
            rows = service.meta.get("rows_of")
            return f"postgres {service.meta.get('state', 'whole')} by {told}" + (
                f" ({len(rows)} tables)" if isinstance(rows, list) else ""
            )
    return "no postgres"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.service_load", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument(
        "--rounds", type=int, default=4, help="an even number: each side first in half of them"
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="cap per side")
    parser.add_argument("--warmup", type=int, default=300, help="requests per warm-up side")
    parser.add_argument("--drain", type=float, default=120.0, help="wait for kept runs")
    parser.add_argument(
        "--declare",
        default=",".join(refund_service.SERVICES),
        help="the services the capture declares, by name (db, cache; empty: none), to see "
        "what each one costs",
    )
    args = parser.parse_args(argv)
    declare = {name for name in args.declare.split(",") if name}
    if not declare <= set(refund_service.SERVICES):
        parser.error(f"--declare: expected names among {', '.join(refund_service.SERVICES)}")
    who = f"{args.clients} clients" + (
        "" if declare == set(refund_service.SERVICES) else f", declaring {args.declare or 'none'}"
    )
    specs = [
        RestoreSpec(name="db", kind="postgres", env="DATABASE_URL"),
        RestoreSpec(name="cache", kind="redis", env="REDIS_URL"),
    ]
    saved = {k: os.environ.get(k) for k in ("DATABASE_URL", "REDIS_URL", "PAYMENTS_URL")}
    url, stop = refund_load.gateway(refund_service.GATEWAY_TIMEOUT * 2)
    throughput: list[float] = []
    p99: list[float] = []
    clean: list[float] = []
    """Throughput ratios of the rounds where both sides answered every request with 200: a
    side whose gateway calls time out answers some with 500, slower, which flatters the
    other side."""
    machine_ratio: list[float] = []
    """The machine's CPU a request, capture on / off, by round (see :class:`_Side`)."""
    try:
        with bring_up(specs) as env:
            db, cache = env.services["db"].url, env.services["cache"].url
            os.environ.update(DATABASE_URL=db, REDIS_URL=cache, PAYMENTS_URL=url)
            refund_service.setup(db, 0)
            containers = machine.Containers(env)

            def side(name: str, capture_on: bool, requests: int) -> _Side:
                # fresh order ids per side (the gateway is slow on a first charge), the same
                # numbers on both sides: the same orders are slow
                orders = [f"{name}-o-{n}" for n in range(1, requests + 1)]
                _reset(db, cache, orders)
                return _side(
                    capture_on, orders, args.clients, args.seconds, args.drain, containers, declare
                )()

            print(f"warm-up ({args.warmup} requests a side)", flush=True)
            for capture_on in (True, False):
                side(f"w{'c' if capture_on else 'n'}", capture_on, args.warmup)
            for i in range(args.rounds):
                print(f"round {i + 1} of {args.rounds}", flush=True)
                sides: dict[bool, _Side] = {}
                for capture_on in _order(i):
                    sides[capture_on] = side(
                        f"r{i}{'c' if capture_on else 'n'}", capture_on, args.requests
                    )
                loads = {capture_on: done.load for capture_on, done in sides.items()}
                machine_ratio.append(sides[True].machine_ms / sides[False].machine_ms)
                throughput.append(loads[True].throughput / loads[False].throughput)
                if all(set(load.statuses) == {200} for load in loads.values()):
                    clean.append(throughput[-1])
                p99.append(loads[True].quantile(0.99) / loads[False].quantile(0.99))
                print(
                    f"  ratios: throughput {throughput[-1]:.2f}x, p99 {p99[-1]:.2f}x, "
                    f"machine CPU a request {machine_ratio[-1]:.2f}x"
                )
    finally:
        stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    record(
        f"service throughput, capture on (keep=failed) / off, {who}",
        throughput,
        goal=">= 0.9x",
        holds=lambda m: m >= 0.9,
    )
    if clean:
        record(
            f"service throughput, capture on / off, {who}, rounds where "
            "every request of both sides was answered 200",
            clean,
            goal=">= 0.9x",
            holds=lambda m: m >= 0.9,
        )
    else:
        print("service throughput: no round where both sides answered every request 200")
    record(
        f"service p99 latency, capture on (keep=failed) / off, {who}",
        p99,
        goal="<= 1.2x",
        holds=lambda m: m <= 1.2,
    )
    record(
        f"service: the machine's CPU a request (this process, its child processes, the "
        f"services' containers), capture on / off, {who}",
        machine_ratio,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
