"""The container sandbox against a real engine: labels and cleanup, frozen clock, no way out,
restore and reset, clear failures."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from sandbox.containers import RestoreSpec, bring_up, connect, container_spec, firewall, gc
from sandbox.containers.images import IMAGES, ImageDef
from sandbox.containers.labels import MANAGED, SESSION, Owner, new_session_id
from sandbox.errors import ImageMissingError, ServiceNotReadyError, ServiceVersionError
from sandbox.services import get_kind

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
FROZEN = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    c = connect()
    yield c
    c.close()


def labelled(client: Any, session: str) -> tuple[list[Any], list[Any]]:
    wanted = {"label": f"{SESSION}={session}"}
    return client.containers.list(all=True, filters=wanted), client.networks.list(filters=wanted)


def test_smoke_local_image_exec_and_cleanup(client: Any) -> None:
    """CI smoke test: a locally built image starts with our labels, runs a command, and
    nothing labelled by this test remains afterwards."""
    owner = Owner.current()
    container = client.containers.run(
        IMAGES["redis"].tag,
        detach=True,
        labels=owner.labels(),
        user="redis",
        mem_limit="64m",
        pids_limit=32,
        network_disabled=True,
    )
    try:
        code, out = container.exec_run(["sh", "-c", "echo sandbox-$(id -un)"])
        assert code == 0
        assert out.decode().strip() == "sandbox-redis"
    finally:
        container.remove(force=True)
    assert labelled(client, owner.session) == ([], [])


def test_postgres_clock_is_frozen_and_bindings_point_at_it(client: Any) -> None:
    with bring_up(
        [RestoreSpec("db", "postgres", database="app")], frozen_at=FROZEN, client=client
    ) as env:
        url = env.env["DATABASE_URL"]
        assert url == env.services["db"].url
        assert url.startswith("postgresql://postgres@") and url.endswith(":5432/app")
        # By name only on a network of the sandbox's own (the shared one resolves none).
        internal = None if env.network_shared else "postgresql://postgres@db:5432/app"
        assert env.services["db"].internal_url == internal
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT now(), current_user").fetchone()
        assert row is not None
        now, user = row
        assert FROZEN <= now < FROZEN + timedelta(minutes=2), now
        assert user == "postgres"
        code, out = env.exec("db", ["id", "-u"])
        assert code == 0 and out.strip() != "0"  # not root
        session = env.session
    assert labelled(client, session) == ([], [])


def test_redis_clock_is_frozen_and_restored_ttls_hold(client: Any) -> None:
    """Redis starts under libfaketime (glibc's malloc in front of jemalloc): TIME is the
    capture time, and a restored key keeps its remaining TTL on the frozen clock."""
    rd = get_kind("redis")
    with bring_up([RestoreSpec("cache", "redis")], client=client) as source:
        r = redis.Redis.from_url(source.env["REDIS_URL"])
        r.set("session:1", "alive", px=600_000)
        r.set("stock:book", "3")
        state = rd.capture(source.env["REDIS_URL"])

    with bring_up(
        [RestoreSpec("cache", "redis", data=state.data)], frozen_at=FROZEN, client=client
    ) as env:
        assert env.services["cache"].restored
        r = redis.Redis.from_url(env.env["REDIS_URL"])
        seconds, micros = r.time()
        now = datetime.fromtimestamp(seconds + micros / 1e6, UTC)
        # "@..." starts the clock at the capture time when the server starts, then it runs.
        assert FROZEN <= now < FROZEN + timedelta(seconds=30), now
        assert 590_000 < r.pttl("session:1") <= 600_000
        assert r.get("session:1") == b"alive"
        assert r.ttl("stock:book") == -1 and r.get("stock:book") == b"3"
        code, out = env.exec("cache", ["date", "-u", "+%Y"])
        assert code == 0 and out.strip() == "2024", out  # the container's own clock too


def _gateway(network: Any) -> str:
    config = network.attrs["IPAM"]["Config"][0]
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


def _listen() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(8)
    threading.Thread(target=lambda: _accept_forever(server), daemon=True).start()
    return server, server.getsockname()[1]


def _accept_forever(server: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while True:
            conn, _ = server.accept()
            conn.close()


def test_sandbox_network_has_no_way_out(client: Any) -> None:
    """From inside the sandbox, neither this host (where a port really listens) nor any
    other address answers; from the host, the service does."""
    server, port = _listen()
    try:
        with bring_up([RestoreSpec("cache", "redis")], client=client) as env:
            assert redis.Redis.from_url(env.services["cache"].url).ping()
            network = client.networks.get(env.network_id)
            assert network.attrs["Internal"] is True
            own_gateway = _gateway(network)
            default_gateway = _gateway(client.networks.get("bridge"))
            # Sanity: the host port answers from the host itself.
            socket.create_connection((default_gateway, port), timeout=2).close()
            targets = [f"{own_gateway}/{port}", f"{default_gateway}/{port}", "1.1.1.1/53"]
            script = "; ".join(
                f"timeout 3 bash -c '</dev/tcp/{t}' 2>/dev/null && echo open {t} || echo closed {t}"
                for t in targets
            )
            code, out = env.exec("cache", ["bash", "-c", script])
            assert code == 0, out
            if not env.host_isolated:
                pytest.xfail("host guard needs root and iptables; the host is reachable")
            assert out.split("\n")[:3] == [f"closed {t}" for t in targets], out
    finally:
        server.close()


def test_restore_then_reset_postgres_and_redis(client: Any) -> None:
    """State captured from one sandbox is restored into another; reset returns to it."""
    pg, rd = get_kind("postgres"), get_kind("redis")
    with bring_up(
        [RestoreSpec("db", "postgres", database="shop"), RestoreSpec("cache", "redis")],
        client=client,
    ) as source:
        with psycopg.connect(source.env["DATABASE_URL"], autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text)")
            conn.execute("INSERT INTO orders VALUES (1, 'book'), (2, 'pen')")
        redis.Redis.from_url(source.env["REDIS_URL"]).set("stock:book", "3")
        pg_state = pg.capture(source.env["DATABASE_URL"])
        rd_state = rd.capture(source.env["REDIS_URL"])

    services = [
        RestoreSpec("db", "postgres", database="shop", data=pg_state.data, version="15.18"),
        RestoreSpec("cache", "redis", env="CACHE", data=rd_state.data),
    ]
    with bring_up(services, client=client) as env:
        assert env.services["db"].restored and env.services["cache"].restored
        db, cache = env.env["DATABASE_URL"], env.env["CACHE"]
        assert pg.state_hash(db) == pg_state.state_hash
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("INSERT INTO orders VALUES (3, 'duplicate')")
        redis.Redis.from_url(cache).set("stock:book", "0")
        env.reset()
        with psycopg.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (2,)
        assert redis.Redis.from_url(cache).get("stock:book") == b"3"


def test_newer_postgres_dump_is_refused_before_anything_starts(client: Any) -> None:
    with pytest.raises(ServiceVersionError, match=r"postgres 16\.2.*newer"):
        bring_up([RestoreSpec("db", "postgres", data=b"x", version="16.2")], client=client)


def test_missing_image_names_make_images(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(IMAGES, "redis", ImageDef("redis", "sandbox-replayer/nope:0", "redis"))
    with pytest.raises(ImageMissingError, match=r"sandbox-replayer/nope:0.*make images"):
        bring_up([RestoreSpec("cache", "redis")], client=client)


def test_never_ready_carries_the_last_log_lines(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    never = dataclasses.replace(container_spec("redis"), ready=lambda url: False)
    monkeypatch.setattr(type(get_kind("redis")), "container", never)
    session = new_session_id()
    with pytest.raises(ServiceNotReadyError, match=r"(?s)within 1 s.*Ready to accept"):
        bring_up([RestoreSpec("cache", "redis")], client=client, timeout=1, session=session)
    assert labelled(client, session) == ([], [])


CHILD = textwrap.dedent(
    """
    import sys, time
    from sandbox.containers import RestoreSpec, bring_up

    def progress(line):
        print(line, flush=True)

    env = bring_up(
        [RestoreSpec("db", "postgres")],
        session=sys.argv[1],
        progress=progress,
        private_network=True,
    )
    print("UP", flush=True)
    time.sleep(120)
    """
)


def _child(session: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, session],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _read_until(proc: subprocess.Popen[str], marker: str) -> None:
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return
    raise AssertionError(f"child ended before {marker!r}:\n{''.join(seen)}")


def test_sigkill_mid_bring_up_then_gc_leaves_nothing(client: Any) -> None:
    session = new_session_id()
    proc = _child(session)
    try:
        _read_until(proc, "db: started")  # network and container exist, not yet ready
    finally:
        proc.kill()
        proc.wait(10)
    containers, networks = labelled(client, session)
    assert containers and networks  # a SIGKILL cannot be cleaned up after...
    report = gc()  # ...but gc finds the dead owner by its labels
    assert any(session in name for name in report.containers)
    assert labelled(client, session) == ([], [])
    assert session not in firewall.rule_sessions()


def test_sigterm_cleans_up_at_once(client: Any) -> None:
    session = new_session_id()
    proc = _child(session)
    try:
        _read_until(proc, "UP")
        assert labelled(client, session)[0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert labelled(client, session) == ([], [])
    assert session not in firewall.rule_sessions()


def test_gc_keeps_live_sessions(client: Any) -> None:
    with bring_up([RestoreSpec("cache", "redis")], client=client, private_network=True) as env:
        gc(client=client)
        containers, networks = labelled(client, env.session)
        assert len(containers) == 1 and len(networks) == 1
        assert containers[0].labels[MANAGED] == "true"
