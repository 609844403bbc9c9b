"""The service containers run in the run's time zone: Postgres' ``timezone`` setting and
``now()::text`` show local time in the recorded zone, at the frozen instant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from sandbox.containers import RestoreSpec, bring_up, connect

pytestmark = pytest.mark.docker
FROZEN = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)  # 07:00 in New York (EST, UTC-5)


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    c = connect()
    yield c
    c.close()


def test_postgres_runs_in_the_recorded_zone_at_the_frozen_instant(client: Any) -> None:
    with bring_up(
        [RestoreSpec("db", "postgres", database="app")],
        frozen_at=FROZEN,
        timezone="America/New_York",
        client=client,
    ) as env:
        with psycopg.connect(env.env["DATABASE_URL"]) as conn:
            row = conn.execute("SELECT current_setting('TimeZone'), now()::text, now()").fetchone()
        code, out = env.exec("db", ["date", "+%H %Z"])
    assert row is not None
    zone, text, now = row
    assert zone == "America/New_York"
    assert text.startswith("2024-03-01 07:0") and text.endswith("-05"), text
    assert FROZEN <= now < FROZEN + timedelta(minutes=2), now
    assert code == 0 and out.split() == ["07", "EST"], out


def test_a_service_runs_in_its_own_recorded_zone_not_the_sandboxs(client: Any) -> None:
    with (
        bring_up(
            [RestoreSpec("db", "postgres", database="app", timezone="UTC")],
            frozen_at=FROZEN,
            timezone="America/New_York",
            client=client,
        ) as env,
        psycopg.connect(env.env["DATABASE_URL"]) as conn,
    ):
        row = conn.execute("SELECT current_setting('TimeZone'), now()::text").fetchone()
    assert row is not None
    zone, text = row
    assert zone == "UTC"
    assert text.startswith("2024-03-01 12:0") and text.endswith("+00"), text
