"""Sandboxes sized to their state: a database larger than the old fixed 256 MB tmpfs could
hold replays with the defaults, and a state the host cannot hold is refused up front."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.labels import SESSION
from sandbox.errors import ResourceError
from sandbox.services import get_kind

pytestmark = pytest.mark.docker
MIB = 1 << 20


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    c = connect()
    yield c
    c.close()


def test_a_database_beyond_the_old_fixed_tmpfs_restores_resets_and_judges(client: Any) -> None:
    """About 130 MB of table data with its indexes: three copies (database, restore point,
    a reset's copy) did not fit the old 256 MB tmpfs."""
    pg = get_kind("postgres")
    with bring_up([RestoreSpec("db", "postgres", database="big")], client=client) as source:
        url = source.env["DATABASE_URL"]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE rows AS SELECT g AS id, md5(g::text) || repeat('y', 60) AS body"
                " FROM generate_series(1, 1000000) g;"
                "ALTER TABLE rows ADD PRIMARY KEY (id);"
                "CREATE TABLE small (id int PRIMARY KEY, qty int); INSERT INTO small VALUES (1, 1)"
            )
            size = conn.execute("SELECT pg_database_size('big')").fetchone()
        captured = pg.capture(url)
    assert size is not None and size[0] > 120 * MIB
    assert captured.meta["state_bytes"] == size[0]

    spec = RestoreSpec(
        "db", "postgres", database="big", data=captured.data, state_bytes=int(size[0])
    )
    with bring_up([spec], client=client) as env:
        db = env.env["DATABASE_URL"]
        container = client.containers.get(env.services["db"].container_id)
        tmpfs = container.attrs["HostConfig"]["Tmpfs"]["/var/lib/postgresql"]
        tmpfs_mib = int(tmpfs.rsplit("size=", 1)[1].rstrip("m"))
        assert tmpfs_mib > 3 * size[0] / MIB, tmpfs
        assert container.attrs["HostConfig"]["Memory"] > tmpfs_mib * MIB
        assert pg.state_hash(db) == captured.state_hash
        for _ in range(2):
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute("UPDATE small SET qty = qty + 1")
            assert pg.state_hash(db) != captured.state_hash
            env.reset()
            assert pg.state_hash(db) == captured.state_hash


def test_a_state_the_host_cannot_hold_is_refused_naming_the_size(client: Any) -> None:
    huge = RestoreSpec("db", "postgres", data=b"x", version="15.18", state_bytes=1 << 50)
    with pytest.raises(
        ResourceError, match=r"needs [\d.]+ [TP]B of memory \(db .* for 1024\.0 TB of state\)"
    ) as err:
        bring_up([huge], client=client, session="sizing-refused")
    assert "available" in str(err.value)
    found = client.containers.list(all=True, filters={"label": f"{SESSION}=sizing-refused"})
    assert found == [], "nothing was started"
