"""Touched-state capture against whole capture: ``python -m bench.touched [--size MB]
[--repeat N]``.

One database holds a large table nobody touches (``--size`` MB, 300 by default) and small
tables the run touches (it reads ``orders`` and adds rows to ``cart``). Each side captures
the state before the run, runs it, and captures the end state:

- **whole**: ``PostgresKind.capture`` before and after (``pg_dump`` of everything, tables
  hashed in the server);
- **touched**: ``PostgresKind.pin`` before (a pinned snapshot), ``finish`` after (the schema
  of all, the rows of the touched tables, before and after).

Figures: whole / touched (median ratio, spread over the rounds) and the touched side's
seconds. Sides alternate after one warm-up each. Needs a Docker engine, the postgres image
and the host's ``pg_dump``.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import psycopg

from bench.compare import compare, ratios, record
from bench.pgscale import MIB, pg_server
from sandbox.services.postgres import PostgresKind

QUICK = ["--size", "20", "--repeat", "3"]
ROW_BYTES = 230
"""About what one row of the large table takes on disk (an int and 192 characters)."""

SCHEMA = """
CREATE TABLE big (id int PRIMARY KEY, body text NOT NULL);
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, item text);
CREATE TABLE cart (id serial PRIMARY KEY, item text NOT NULL);
INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 100) g;
INSERT INTO orders SELECT g, 1 + g % 100, 'item ' || g FROM generate_series(1, 1000) g;
"""


def _run(url: str) -> None:
    """The agent: read the orders, add two of them to the cart (its connection closed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        items = [r[0] for r in conn.execute("SELECT item FROM orders ORDER BY id LIMIT 2")]
        for item in items:
            conn.execute("INSERT INTO cart (item) VALUES (%s)", (item,))


def main(argv: list[str] | None = None) -> int:
    import docker

    parser = argparse.ArgumentParser(prog="bench.touched", description=__doc__)
    parser.add_argument("--size", type=int, default=300, help="MB of the untouched table")
    parser.add_argument("--repeat", type=int, default=5, help="rounds")
    args = parser.parse_args(argv)
    kind = PostgresKind()
    with pg_server(docker.from_env(), int(args.size * MIB * 1.5)) as server:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        url = server[:-8] + "bench"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA)
            rows = args.size * MIB // ROW_BYTES
            conn.execute(
                "INSERT INTO big SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, %s) g",
                (rows,),
            )
            conn.execute("VACUUM ANALYZE")
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        print(f"database: {(size[0] if size else 0) / MIB:.0f} MB, {rows} rows in the big table")

        def whole() -> None:
            kind.capture(url)
            _run(url)
            kind.capture(url)

        def touched() -> None:
            pinned = kind.pin(url)
            _run(url)
            before, _after = pinned.finish()
            assert "public.big" not in (before.meta.get("rows_of") or []), before.meta

        ours, theirs = compare(touched, whole, rounds=args.repeat)
    record(
        f"touched capture ({args.size} MB untouched): whole / touched, before and after a run",
        ratios(theirs, ours),
        goal=">= 5x at 300 MB",
        holds=(lambda r: r >= 5) if args.size >= 300 else None,
    )
    record(
        f"touched capture ({args.size} MB untouched): seconds, before and after a run",
        ours,
        goal="<= 1 s",
        holds=lambda s: s <= 1.0,
        unit="s",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
