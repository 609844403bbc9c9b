"""Redis at real sizes: ``python -m bench.redisscale [--keys 10000,100000,1000000]
[--repeat 3]`` (the quick mode: ``--keys 10000,100000``).

For each key count, in one source sandbox filled by ``DEBUG POPULATE`` (string keys) plus
a hash, a set, a sorted set and a list of 1000 members each:

1. **Capture**: ``RedisKind.capture`` (the server's RDB by ``SYNC``, made byte-stable,
   hashed from its logical values) against ``redis-cli --rdb`` of the same server into a
   file in memory (``/dev/shm``). Goal <= 2x.
2. **Second capture adds no blob**: two captures of the unchanged keyspace are the same
   bytes (checked, printed).
3. **Bring-up**: ``bring_up`` of the captured state (the shared sandbox network where this
   host can guard it, container start, readiness, the RDB written into the container and
   loaded, restore point, CPU limit) then close,
   against a container of the same image started on that RDB (a bind-mounted folder),
   waited for with the same probe until it answers (loaded), then removed. Goal <= 2x.

Sides alternate, after one warm-up each; medians and spreads (max/min) over ``--repeat``
rounds. Needs a Docker engine, the redis image and the host's ``redis-cli``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import redis

from bench.compare import compare, ratios, record
from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.images import image_tag
from sandbox.containers.specs import container_spec
from sandbox.services import get_kind
from sandbox.services.redis import unpack_rdb

QUICK = ["--keys", "10000", "--repeat", "2"]
MEMBERS = 1000


def _fill(url: str, keys: int) -> None:
    client = redis.Redis.from_url(url)
    client.flushall()
    client.execute_command("DEBUG", "POPULATE", keys - 4)  # type: ignore[no-untyped-call]
    client.hset("h", mapping={f"f{i}": i for i in range(MEMBERS)})
    client.sadd("s", *range(MEMBERS))
    client.zadd("z", {f"m{i}": i / 3 for i in range(MEMBERS)})
    client.rpush("l", *range(MEMBERS))
    client.close()


def _redis_cli_rdb(host: str, port: int, target: Path) -> None:
    subprocess.run(
        ["redis-cli", "-h", host, "-p", str(port), "--rdb", str(target)],
        check=True,
        capture_output=True,
    )


def _container_on_rdb(client: object, folder: Path) -> None:
    """Baseline of 3: a container of the same image started on the RDB, until it answers."""
    cspec = container_spec("redis")
    container = client.containers.run(  # type: ignore[attr-defined]
        image_tag(cspec.image),
        ["--dir", "/data", "--dbfilename", "dump.rdb"],
        detach=True,
        user=cspec.user,
        volumes={str(folder): {"bind": "/data", "mode": "ro"}},
        labels={"org.sandbox-replayer.managed": "true", "org.sandbox-replayer.bench": "redis"},
    )
    try:
        container.reload()
        url = f"redis://{container.attrs['NetworkSettings']['IPAddress']}:{cspec.port}/0"
        while not cspec.ready(url):
            time.sleep(0.05)
    finally:
        container.remove(force=True)


def _keys(client: object, keys: int, repeat: int, shm: Path) -> None:
    kind = get_kind("redis")
    with bring_up([RestoreSpec("src", "redis")], client=client) as source:
        url = source.env["REDIS_URL"]
        _fill(url, keys)
        endpoint = source.services["src"]
        assert endpoint.ip is not None and endpoint.port is not None
        target = shm / "cli.rdb"
        print(f"redis {keys} keys:")
        record(
            f"redis {keys} keys: capture / redis-cli --rdb",
            ratios(
                *compare(
                    lambda: kind.capture(url),
                    lambda: _redis_cli_rdb(endpoint.ip or "", endpoint.port or 0, target),
                    rounds=repeat,
                )
            ),
            goal="<= 2x",
            holds=lambda r: r <= 2,
        )
        first, second = kind.capture(url), kind.capture(url)
        same = "same blob" if first.data == second.data else "NEW BLOB"
        print(f"  second capture of the unchanged keyspace: {same} ({len(first.data)} bytes)")

    folder = shm / "data"
    folder.mkdir(exist_ok=True)
    (folder / "dump.rdb").write_bytes(unpack_rdb(first.data)[1])
    (folder / "dump.rdb").chmod(0o644)
    spec = RestoreSpec("cache", "redis", data=first.data, state_bytes=first.meta["state_bytes"])  # type: ignore[arg-type]

    def ours() -> None:
        bring_up([spec], client=client).close()

    record(
        f"redis {keys} keys: bring-up / container loading the RDB",
        ratios(*compare(ours, lambda: _container_on_rdb(client, folder), rounds=repeat)),
        goal="<= 2x",
        holds=lambda r: r <= 2,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="redis capture/bring-up at scale")
    parser.add_argument("--keys", default="10000,100000,1000000", help="key counts")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if shutil.which("redis-cli") is None:
        print("redis-cli is not installed (Debian: redis-tools): the baseline needs it")
        return 2
    client = connect()
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="bench-redis-", dir=base) as tmp:
        os.chmod(tmp, 0o755)
        for keys in (int(k) for k in args.keys.split(",")):
            _keys(client, keys, args.repeat, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
