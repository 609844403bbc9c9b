"""``docker inspect`` of every sandbox container: service containers (Postgres, Redis) and the
runner have no capabilities, a read-only root filesystem, CPU, memory and pid limits, and sit
on an internal network only. The services still work under those limits (a restore, a
reset and a query) and write only to their tmpfs mounts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.runner import create_runner
from sandbox.replay.isolation.incontainer import ensure_runner_image

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    c = connect()
    yield c
    c.close()


def _assert_hardened(client: Any, container_id: str, network: str) -> None:
    attrs = client.api.inspect_container(container_id)
    host = attrs["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert not host["CapAdd"]
    assert host["Privileged"] is False
    assert host["ReadonlyRootfs"] is True
    assert host["NanoCpus"] > 0 or 0 < host["CpuQuota"] <= 2 * host["CpuPeriod"]
    assert host["Memory"] > 0
    assert host["PidsLimit"] > 0
    assert "no-new-privileges" in (host["SecurityOpt"] or [])
    networks = attrs["NetworkSettings"]["Networks"]
    assert list(networks) == [network]
    assert client.api.inspect_network(network)["Internal"] is True
    assert not attrs["NetworkSettings"]["Ports"] or not any(
        attrs["NetworkSettings"]["Ports"].values()
    )  # nothing published on the host


def test_service_containers_are_hardened_and_still_work(client: Any) -> None:
    with bring_up(
        [RestoreSpec("db", "postgres", database="app"), RestoreSpec("cache", "redis")],
        client=client,
    ) as env:
        assert env.network_name is not None
        for endpoint in env.services.values():
            assert endpoint.container_id is not None
            _assert_hardened(client, endpoint.container_id, env.network_name)
        db, cache = env.services["db"].url, env.services["cache"].url
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (v int)")
            conn.execute("INSERT INTO t VALUES (1)")
        redis.Redis.from_url(cache).set("k", "v")
        env.reset()
        with psycopg.connect(db) as conn:
            assert conn.execute("SELECT to_regclass('t')").fetchone() == (None,)
        assert redis.Redis.from_url(cache).get("k") is None


def test_the_runner_container_is_hardened(client: Any, tmp_path: Path) -> None:
    ensure_runner_image()
    store = tmp_path / "store"
    store.mkdir()
    with bring_up([RestoreSpec("cache", "redis")], client=client, private_network=True) as env:
        assert env.network_name is not None
        runner = create_runner(
            env,
            ["--help"],
            store_folder=store,
            project=tmp_path,
            services={"cache": env.services["cache"].internal_url or ""},
        )
        _assert_hardened(client, runner.id, env.network_name)
