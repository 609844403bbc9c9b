"""The shared sandbox network (:mod:`sandbox.containers.networks`): containers of two
sandboxes up at once, and of one sandbox, cannot reach each other while this host reaches
them all; closing a sandbox leaves the network and its firewall rules for the next one, and
removes nothing of the other sandbox; a process that makes the network just after another
takes that one, and a foreign network of its name is not joined; missing rules are put back
at the next bring-up; a service gets its CPU limit once its state is restored; the runner
refuses the shared network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
import redis

from sandbox.containers import (
    RestoreSpec,
    bring_up,
    connect,
    container_spec,
    firewall,
    gc,
    networks,
)
from sandbox.containers.bringup import CPU_PERIOD_US, Environment
from sandbox.containers.networks import SHARED_NAME, SHARED_SESSION
from sandbox.containers.runner import create_runner
from sandbox.errors import SandboxError

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    if not firewall.available():
        pytest.skip("the shared network needs root and iptables (its guard is checked)")
    c = connect()
    yield c
    c.close()


def _reaches(env: Environment, service: str, ip: str | None, port: int | None) -> bool:
    """Whether ``service``'s container opens a TCP connection to ``ip:port`` within 3 s
    (bash's /dev/tcp: both images have bash, neither has a client of the other)."""
    probe = f"timeout 3 bash -c 'exec 3<>/dev/tcp/{ip}/{port}'"
    code, _ = env.exec(service, ["bash", "-c", probe])
    return code == 0


def test_two_sandboxes_share_the_network_and_reach_nothing_of_each_other(client: Any) -> None:
    with (
        bring_up(
            [RestoreSpec("db", "postgres", database="app"), RestoreSpec("cache", "redis")],
            client=client,
        ) as one,
        bring_up([RestoreSpec("db", "postgres", database="app")], client=client) as two,
    ):
        assert one.network_shared and two.network_shared
        assert one.network_name == two.network_name == SHARED_NAME
        assert one.host_isolated and two.host_isolated
        db1, cache1, db2 = one.services["db"], one.services["cache"], two.services["db"]
        # This host reaches every service...
        for db in (db1, db2):
            with psycopg.connect(db.url) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        assert redis.Redis.from_url(cache1.url).ping()
        # ...and the probe does open a connection where one is allowed (its own server).
        assert _reaches(one, "db", "127.0.0.1", db1.port)
        # No container reaches another: of the other sandbox, or of its own.
        assert not _reaches(one, "db", db2.ip, db2.port)
        assert not _reaches(two, "db", db1.ip, db1.port)
        assert not _reaches(one, "db", cache1.ip, cache1.port)
        assert not _reaches(one, "cache", db1.ip, db1.port)
        one_containers = {c.id for c in one._containers.values()}
        two_containers = {c.id for c in two._containers.values()}
        one.close()
        # The other sandbox is untouched; the network and its rules stay. (Other processes'
        # sandboxes may be on the shared network meanwhile: only these two are looked at.)
        with psycopg.connect(db2.url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        network = client.networks.get(SHARED_NAME)
        network.reload()
        on_it = set(network.attrs["Containers"])
        assert two_containers <= on_it and not one_containers & on_it
    on_it = set(client.networks.get(SHARED_NAME).attrs["Containers"])
    assert not (one_containers | two_containers) & on_it
    assert SHARED_SESSION in firewall.rule_sessions()
    assert not {one.session, two.session} & set(firewall.rule_sessions())
    gc(client=client)
    assert client.networks.get(SHARED_NAME).id == network.id  # gc keeps it
    assert SHARED_SESSION in firewall.rule_sessions()


def test_missing_rules_are_put_back_before_a_container_starts(client: Any) -> None:
    with bring_up([RestoreSpec("cache", "redis")], client=client) as env:
        assert env.network_shared
    firewall.unblock_host(SHARED_SESSION)  # as after a reboot, or a flush of iptables
    assert SHARED_SESSION not in firewall.rule_sessions()
    with bring_up([RestoreSpec("cache", "redis")], client=client) as env:
        assert env.network_shared and env.host_isolated
        assert len(firewall.rule_sessions()[SHARED_SESSION]) == 2


def test_making_the_network_when_another_process_just_made_it_takes_that_one(
    client: Any,
) -> None:
    with bring_up([RestoreSpec("cache", "redis")], client=client) as env:
        assert env.network_shared
        made = networks._create(client)  # what a process that lost the race to make it does
    assert made.id == env.network_id
    assert [n.id for n in client.networks.list(names=[SHARED_NAME])] == [env.network_id]


def test_a_foreign_network_of_that_name_is_not_joined(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network named like the shared one but not made by the sandbox (no label, traffic
    between containers on) is not used: the sandbox gets a network of its own."""
    foreign = client.networks.create(f"sbx-foreign-{uuid4().hex[:6]}", internal=True)
    monkeypatch.setattr(networks, "SHARED_NAME", foreign.name)
    try:
        with bring_up([RestoreSpec("cache", "redis")], client=client) as env:
            assert not env.network_shared and env.host_isolated
            assert env.network_id != foreign.id
    finally:
        foreign.remove()


def test_the_cpu_limit_is_set_once_the_state_is_restored(client: Any) -> None:
    with bring_up([RestoreSpec("db", "postgres", database="app")], client=client) as env:
        host = client.api.inspect_container(env.services["db"].container_id)["HostConfig"]
    cpus = container_spec("postgres").cpus
    assert (host["CpuPeriod"], host["CpuQuota"]) == (CPU_PERIOD_US, int(cpus * CPU_PERIOD_US))


def test_the_runner_refuses_the_shared_network(client: Any, tmp_path: Path) -> None:
    with bring_up([RestoreSpec("cache", "redis")], client=client) as env:
        assert env.network_shared
        with pytest.raises(SandboxError, match="network of its own"):
            create_runner(
                env,
                ["--help"],
                store_folder=tmp_path,
                project=tmp_path,
                services={"cache": env.services["cache"].url},
            )
