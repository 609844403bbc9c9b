"""Postgres at real sizes: ``python -m bench.pgscale [--scales 2,7,68] [--repeat 3]``.

For each pgbench scale (2 is about 25 MB, 7 about 100 MB, 68 about 1 GB), in one source
server filled by ``pgbench -i`` (a container of the postgres image with no CPU limit, as a
database server runs; a sandbox's container gets one CPU once its state is restored):

1. **Capture**: ``PostgresKind.capture`` (dump, table hashes in the server, fixed archive
   header) against raw ``pg_dump -Fc -Z1`` of the same database into memory. Goal <= 1.5x.
2. **Second capture adds no blob**: two captures of the unchanged database are the same
   bytes (checked, printed).
3. **Restore and ready**: ``bring_up`` of the captured state (on the shared sandbox network
   where this host can guard it, else a network of its own; container start, readiness,
   restore, restore point, CPU limit) then close, against a fresh container of the same
   image on a tmpfs of the same size, waited for with the same probe, then ``createdb`` and
   raw ``pg_restore --single-transaction``, then removed. Goal <= 1.2x.
4. **Judging a one-row change**: after ``UPDATE`` of one row, ``state_hash`` on the sandbox,
   for a row of a small table (``pgbench_branches``) and of the largest one
   (``pgbench_accounts``), against a full hash of the same database. Goal <= 1 s at 1 GB.

Sides alternate, after one warm-up each; medians and spreads (max/min) over ``--repeat``
rounds. Needs a Docker engine, the postgres image and the host's pgbench and pg_dump.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import psycopg

from bench.compare import compare, ratios, record, timed
from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.images import image_tag
from sandbox.containers.sizing import size_for
from sandbox.containers.specs import container_spec
from sandbox.services import get_kind
from sandbox.services.postgres.pgstate import logical_state, state_fingerprint

QUICK = ["--scales", "2", "--repeat", "2"]
MIB = 1 << 20


@contextmanager
def pg_server(client: object, state_bytes: int) -> Iterator[str]:
    """A container of the postgres image on a tmpfs as large as a sandbox's for
    ``state_bytes``, with no CPU limit (a database server as its users run it, where the
    sandbox's own containers get one CPU once restored); yields its ``.../postgres`` URL
    once it answers."""
    cspec = container_spec("postgres")
    size = size_for(cspec.storage, state_bytes)
    container = client.containers.run(  # type: ignore[attr-defined]
        image_tag(cspec.image),
        list(cspec.command),
        detach=True,
        user=cspec.user,
        tmpfs=size.tmpfs(cspec.storage),
        mem_limit=size.mem_limit,
        labels={"org.sandbox-replayer.managed": "true", "org.sandbox-replayer.bench": "pg"},
    )
    try:
        container.reload()
        ip = container.attrs["NetworkSettings"]["IPAddress"]
        url = f"postgresql://postgres@{ip}:5432/postgres"
        while not cspec.ready(url):
            time.sleep(0.05)
        yield url
    finally:
        container.remove(force=True)


def _fresh_restore(client: object, dump: bytes, state_bytes: int) -> None:
    """Baseline of 3: a fresh container on a tmpfs as large as ours, ready, raw restore."""
    with pg_server(client, state_bytes) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        subprocess.run(
            ["pg_restore", "--no-owner", "--single-transaction", "-d", url[:-8] + "bench"],
            input=dump,
            check=True,
            capture_output=True,
        )


def _scale(client: object, scale: int, repeat: int) -> None:
    pg = get_kind("postgres")
    with pg_server(client, scale * 17 * MIB) as server:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        url = server[:-8] + "bench"
        subprocess.run(
            ["pgbench", "-i", "-q", "-s", str(scale), url], check=True, capture_output=True
        )
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        size = int(row[0]) if row else 0
        print(f"pgbench scale {scale}: {size / MIB:.0f} MB")

        def raw_dump() -> bytes:
            return subprocess.run(
                ["pg_dump", "-Fc", "-Z1", url], check=True, capture_output=True
            ).stdout

        record(
            f"pg scale {scale}: capture / raw pg_dump -Fc -Z1",
            ratios(*compare(lambda: pg.capture(url), raw_dump, rounds=repeat)),
            goal="<= 1.5x",
            holds=lambda r: r <= 1.5,
        )
        first, second = pg.capture(url), pg.capture(url)
        same = first.data == second.data
        print(
            f"  second capture of the unchanged db: {'same blob' if same else 'NEW BLOB'}"
            f" ({len(first.data) / MIB:.1f} MB)"
        )
        dump = raw_dump()

    spec = RestoreSpec("db", "postgres", database="bench", data=first.data, state_bytes=size)

    def ours() -> None:
        bring_up([spec], client=client).close()

    record(
        f"pg scale {scale}: restore+ready / fresh + pg_restore",
        ratios(*compare(ours, lambda: _fresh_restore(client, dump, size), rounds=repeat)),
        goal="<= 1.2x",
        holds=lambda r: r <= 1.2,
    )

    with bring_up([spec], client=client) as env:
        db = env.env["DATABASE_URL"]
        for table, key in (("pgbench_branches", "bid"), ("pgbench_accounts", "aid")):
            judged, full = [], []
            for i in range(repeat):
                with psycopg.connect(db, autocommit=True) as conn:
                    conn.execute(f"UPDATE {table} SET filler = 'x{i}' WHERE {key} = 1")
                judged.append(timed(lambda: pg.state_hash(db)))
                with psycopg.connect(db) as conn:
                    full.append(timed(lambda: state_fingerprint(logical_state(conn))))
                env.reset()
            print(f"  full hash of {table}: median {statistics.median(full):.3f} s")
            record(
                f"pg scale {scale}: judge a one-row change in {table}",
                judged,
                goal="<= 1 s (at 1 GB)",
                holds=lambda t: t <= 1,
                unit=" s",
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="postgres capture/restore/judge at scale")
    parser.add_argument("--scales", default="2,7,68", help="pgbench scales (68 is ~1 GB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    client = connect()
    for scale in (int(s) for s in args.scales.split(",")):
        _scale(client, scale, args.repeat)
    print("(postgres data on tmpfs sized by", container_spec("postgres").storage, ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
