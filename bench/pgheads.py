"""What a kept run's Postgres state costs the machine, a schema's archive head reused against
``pg_dump`` every time: ``python -m bench.pgheads [--runs N] [--rounds N]``.

The example service's database (``examples/refund_service.py``, 2000 orders, 300 refunds)
in a container of the postgres image. One side's unit of work is what a kept run of the
service pays for its state: the state before pinned (``PostgresKind.pin``), a refund written,
then both states dumped (``finish``: the touched tables' rows, before and after). Both sides
do the same work; one keeps the archive heads this process dumped (the default), the other
keeps none, so every dump runs ``pg_dump`` (as before heads were kept). Each round runs
``--runs`` of them per side, the sides alternating, after one warm-up each.

Figures (median and spread over the rounds): the machine's CPU a kept run, ``pg_dump`` every
time / heads reused (this process, its child processes and the database's container, as
:mod:`bench._machine` counts them), the same for wall time, and each side's milliseconds.
Needs a Docker engine, the postgres image and the host's ``pg_dump``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import psycopg

from bench import _machine as machine
from bench.compare import compare_all, ratios, record
from examples import refund_service
from sandbox.containers import RestoreSpec, bring_up
from sandbox.services.postgres import PostgresKind, pgheads

QUICK = ["--runs", "5", "--rounds", "3"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.pgheads", description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="kept runs a side, each round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    kind = PostgresKind()
    with bring_up([RestoreSpec(name="db", kind="postgres", env="DATABASE_URL")]) as env:
        url = env.services["db"].url
        refund_service.setup(url, 2000)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO refunds (order_id, cents) SELECT id, cents FROM orders LIMIT 300"
            )
        containers = machine.Containers(env)
        kept = pgheads.Heads()
        cpu: dict[bool, list[float]] = {True: [], False: []}

        def machine_cpu() -> float:
            return machine.process_cpu() + machine.children_cpu() + containers.cpu()["db"]

        def kept_runs(reuse: bool) -> float:
            """Seconds a kept run, its machine CPU noted."""
            pgheads.HEADS = kept if reuse else pgheads.Heads(kept=0)
            began, start = machine_cpu(), time.perf_counter()
            for i in range(args.runs):
                pinned = kind.pin(url)
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("INSERT INTO refunds (order_id, cents) VALUES (%s, 1)", (i,))
                pinned.finish()
            seconds = time.perf_counter() - start
            cpu[reuse].append((machine_cpu() - began) / args.runs)
            return seconds / args.runs

        heads, dumps = compare_all(
            [lambda: kept_runs(True), lambda: kept_runs(False)], rounds=args.rounds
        )
        pgheads.HEADS = kept
    reused, every = cpu[True][1:], cpu[False][1:]  # the warm-up's left out
    what = "postgres state of a kept run"
    record(f"{what}: the machine's CPU, pg_dump every time / heads reused", ratios(every, reused))
    record(f"{what}: wall time, pg_dump every time / heads reused", ratios(dumps, heads))
    for name, values in (
        ("heads reused: the machine's CPU", reused),
        ("pg_dump every time: the machine's CPU", every),
        ("heads reused: wall time", heads),
        ("pg_dump every time: wall time", dumps),
    ):
        record(f"{what}, {name}", [v * 1000 for v in values], unit=" ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
