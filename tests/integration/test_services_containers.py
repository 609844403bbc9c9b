"""Service containers for the service-kind tests (imported by the other ``test_services_*``
modules): Postgres and Redis from the local images, the port published on 127.0.0.1 only,
labelled as managed, and always removed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import docker
import psycopg
import pytest
import redis

from sandbox.services.postgres import pgreaders

POSTGRES_IMAGE = "sandbox-replayer/postgres:15"
REDIS_IMAGE = "sandbox-replayer/redis:7"
LABELS = {"org.sandbox-replayer.managed": "true", "org.sandbox-replayer.test": "services"}


@contextmanager
def service_container(
    image: str, port: int, ready: Callable[[int], object], timeout: float = 60.0
) -> Iterator[int]:
    """Run ``image`` and yield the host port of ``port`` once ``ready(host_port)`` passes."""
    client = docker.from_env()
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            pytest.fail(f"image {image} is not built: run `make images`")
        container = client.containers.run(
            image,
            detach=True,
            ports={f"{port}/tcp": ("127.0.0.1", None)},
            labels={**LABELS, "org.sandbox-replayer.session": uuid.uuid4().hex},
        )
        try:
            container.reload()
            host_port = int(
                container.attrs["NetworkSettings"]["Ports"][f"{port}/tcp"][0]["HostPort"]
            )
            deadline = time.monotonic() + timeout
            while True:
                try:
                    ready(host_port)
                    break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        logs = container.logs(tail=20).decode(errors="replace")
                        pytest.fail(f"{image} not ready after {timeout}s ({exc}); logs:\n{logs}")
                    time.sleep(0.1)
            yield host_port
        finally:
            container.remove(force=True, v=True)
    finally:
        client.close()


def _postgres_ready(port: int) -> None:
    psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2).close()


def _redis_ready(port: int) -> None:
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
    try:
        client.ping()
    finally:
        client.close()


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield ``postgresql://postgres@127.0.0.1:PORT`` (append ``/dbname``)."""
    with service_container(POSTGRES_IMAGE, 5432, _postgres_ready) as port:
        yield f"postgresql://postgres@127.0.0.1:{port}"


@contextmanager
def redis_server() -> Iterator[str]:
    """Yield ``redis://127.0.0.1:PORT`` (append ``/db``)."""
    with service_container(REDIS_IMAGE, 6379, _redis_ready) as port:
        yield f"redis://127.0.0.1:{port}"


def create_database(server: str, name: str) -> str:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


def sessions_ended(server: str, name: str, timeout: float = 30.0) -> None:
    """Wait until no client session is left on database ``name``: a session flushes its
    statistics counters as it exits, before it leaves ``pg_stat_activity`` (so a setup's own
    counters are not a later run's, without waiting out the idle flush interval). The
    sessions the capture keeps for its next reads are closed first."""
    pgreaders.READERS.close()
    deadline = time.monotonic() + timeout
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        while True:
            (left,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = %s AND backend_type = 'client backend'",
                (name,),
            ).fetchone() or (0,)
            if not left:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"{left} session(s) still on database {name} after {timeout}s")
            time.sleep(0.02)


@pytest.mark.docker
def test_service_containers_are_labelled_and_removed() -> None:
    client = docker.from_env()
    try:
        with redis_server() as url:
            redis.Redis.from_url(url).ping()
            port = url.rsplit(":", 1)[1]
            mine = [
                c
                for c in client.containers.list(
                    filters={"label": "org.sandbox-replayer.managed=true"}
                )
                if any(
                    b.get("HostPort") == port and b.get("HostIp") == "127.0.0.1"
                    for b in (c.attrs["NetworkSettings"]["Ports"].get("6379/tcp") or [])
                )
            ]
            assert len(mine) == 1
            cid = mine[0].id
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(cid)
    finally:
        client.close()
