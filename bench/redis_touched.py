"""Redis state in production: ``python -m bench.redis_touched [--big-keys 1000000]``.

A run that ends well under ``keep="failed"`` (``capture.run``, the service found at the
agent's first connection, touched state) against a Redis database of ``--big-keys`` keys,
against the same run against one of ``--small-keys`` (10), both in one server (a sandbox
container, filled by ``DEBUG POPULATE``). The run reads two keys and writes one: each first
touch costs one ``DUMP``/``PTTL`` of that key, and nothing is captured when the run ends well,
so its cost should not grow with the database. Goal: ratio <= 2x.

Sides alternate after one warm-up each; median and spread of the per-round ratios over
``--repeat`` rounds. Each run is checked to have left nothing in the store.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import redis

from bench.compare import compare, ratios, record
from sandbox import capture
from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--big-keys", "100000", "--repeat", "3"]


def _fill(url: str, keys: int) -> None:
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.execute_command("DEBUG", "POPULATE", keys)  # type: ignore[no-untyped-call]
    client.close()


def _run(url: str, store: Path) -> None:
    """The run that ends well, captured with ``keep="failed"``; checks it left nothing."""
    environ = {**os.environ, "REDIS_URL": url}
    with capture.run("ok", store=store, keep="failed", environ=environ, packages=False):
        client = redis.Redis.from_url(url)
        client.get("key:1")
        client.get("key:7")
        client.set("seen", 1)
        client.close()
    left = DirectoryStore(store)
    if left.list() or any(True for _ in left.iter_blobs()):
        raise SystemExit("a run that ended well left something in the store")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cost of a run that ends well, keep='failed'")
    parser.add_argument("--big-keys", type=int, default=1_000_000)
    parser.add_argument("--small-keys", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with (
        bring_up([RestoreSpec("src", "redis")], client=connect()) as env,
        tempfile.TemporaryDirectory() as tmp,
    ):
        server = env.env["REDIS_URL"].rsplit("/", 1)[0]
        big, small = f"{server}/1", f"{server}/2"
        _fill(big, args.big_keys)
        _fill(small, args.small_keys)
        store = Path(tmp) / "store"
        ours, theirs = compare(
            lambda: _run(big, store), lambda: _run(small, store), rounds=args.repeat
        )
        print(f"big: {[round(s, 4) for s in ours]} s; small: {[round(s, 4) for s in theirs]} s")
        record(
            f"ok run, keep='failed', Redis {args.big_keys} keys vs {args.small_keys}",
            ratios(ours, theirs),
            goal="<= 2x",
            holds=lambda m: m <= 2.0,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
