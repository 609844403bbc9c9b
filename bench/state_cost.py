"""State in production: ``python -m bench.state_cost [--big-mb 1024] [--repeat 5]``.

A run that ends well under ``keep="failed"`` (``capture.run``, the service found at the
agent's first connection) against a large Postgres database, against the same run against a
small one (``--small-mb``, 10 MB). Both databases live in one server (a container of the
postgres image with no CPU limit, as a database server runs), filled by ``generate_series``:
a table ``items`` of the given size with a primary key, and a small ``settings`` table. The
run connects, reads the settings and one item by its key, and ends well: its state is pinned
(a snapshot shared with the runs starting with it) and released, never dumped, so its cost
should not grow with the database. Goal: ratio <= 2x.

Sides alternate after one warm-up each; median and spread (max/min) of the per-round ratios
over ``--repeat`` rounds. Each run is checked to have left nothing in the store.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import psycopg

from bench.compare import compare, ratios, record
from bench.pgscale import pg_server
from sandbox import capture
from sandbox.containers import connect
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--big-mb", "100", "--repeat", "3"]
MIB = 1 << 20
ROW_BYTES = 290
"""About what one ``items`` row of a 200-character body takes on disk, with its key."""


def _fill(server: str, name: str, mib: int) -> str:
    """Create database ``name`` holding about ``mib`` MiB; its URL."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = server.rsplit("/", 1)[0] + f"/{name}"
    rows = max(1, mib * MIB // ROW_BYTES)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute("INSERT INTO settings VALUES ('mode', 'live'), ('limit', '10')")
        conn.execute("CREATE TABLE items (id bigint, body text NOT NULL)")
        conn.execute(
            "INSERT INTO items SELECT g, repeat(md5(g::text), 6) || 'abcdefgh' "
            "FROM generate_series(1, %s) g",
            (rows,),
        )
        conn.execute("ALTER TABLE items ADD PRIMARY KEY (id)")
        conn.execute("VACUUM ANALYZE")
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    print(f"{name}: {int(size[0]) / MIB if size else 0:.0f} MiB, {rows} rows", flush=True)
    return url


def _run(url: str, store: Path) -> None:
    """The run that ends well, captured with ``keep="failed"``; checks it left nothing."""
    environ = {**os.environ, "DATABASE_URL": url}
    with (
        capture.run("ok", store=store, keep="failed", environ=environ, packages=False),
        psycopg.connect(url, autocommit=True) as conn,
    ):
        conn.execute("SELECT value FROM settings WHERE key = 'mode'").fetchone()
        conn.execute("SELECT body FROM items WHERE id = 42").fetchone()
    left = DirectoryStore(store)
    if left.list() or any(True for _ in left.iter_blobs()):
        raise SystemExit("a run that ended well left something in the store")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cost of a run that ends well, keep='failed'")
    parser.add_argument("--big-mb", type=int, default=1024)
    parser.add_argument("--small-mb", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    client = connect()
    with (
        pg_server(client, (args.big_mb + args.small_mb) * MIB * 2) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        big = _fill(server, "big", args.big_mb)
        small = _fill(server, "small", args.small_mb)
        store = Path(tmp) / "store"
        ours, theirs = compare(
            lambda: _run(big, store), lambda: _run(small, store), rounds=args.repeat
        )
        print(f"big: {[round(s, 3) for s in ours]} s; small: {[round(s, 3) for s in theirs]} s")
        record(
            f"ok run, keep='failed', {args.big_mb} MB vs {args.small_mb} MB Postgres",
            ratios(ours, theirs),
            goal="<= 2x",
            holds=lambda m: m <= 2.0,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
