"""The replay's frozen clock in this process: the real ``datetime`` class, names bound before
it started, SQLite's ``'now'``, tenacity's timer, and the variables a live server gets."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tenacity
from pydantic import BaseModel, TypeAdapter

from sandbox.capture.children import hook_environment
from sandbox.replay.conditions.clock import FrozenClock, LiveClock
from sandbox.replay.isolation.liveprocess import LIVE_VAR, live_process_variables

START = datetime(2024, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
REAL_DATETIME = dt.datetime


@pytest.fixture
def frozen() -> Iterator[FrozenClock]:
    clock = FrozenClock(START)
    clock.start()
    try:
        yield clock
    finally:
        clock.stop()


def test_datetime_stays_the_real_class_and_pydantic_builds_its_schema(
    frozen: FrozenClock,
) -> None:
    from datetime import datetime as imported_now

    class Stamp(BaseModel):
        at: imported_now

    assert dt.datetime is REAL_DATETIME and imported_now is REAL_DATETIME
    assert type(dt.datetime.now()) is REAL_DATETIME
    assert TypeAdapter(dt.datetime).validate_python("2024-01-01T00:00:00") == REAL_DATETIME(
        2024, 1, 1
    )
    assert Stamp(at=dt.datetime.now(UTC)).at == START


def test_names_bound_before_the_freeze_are_frozen_and_time_moves_forward_only(
    frozen: FrozenClock,
) -> None:
    from time import time as bound_time

    assert bound_time() == pytest.approx(START.timestamp())
    frozen.reach(START.timestamp() + 60)
    frozen.reach(START.timestamp() + 30)  # never backwards
    frozen.sleep(5)
    assert datetime.now(UTC) == START + dt.timedelta(seconds=65)
    assert time.monotonic() != pytest.approx(START.timestamp())  # event loops keep real time


def test_stopped_clock_is_the_real_one_again() -> None:
    clock = FrozenClock(START)
    clock.start()
    clock.stop()
    assert abs(time.time() - datetime.now(UTC).timestamp()) < 5
    assert datetime.now(UTC).year > 2024


def test_sqlite_now_is_the_frozen_time(frozen: FrozenClock, tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE t (id INTEGER, at TEXT DEFAULT (datetime('now')))")
    conn.execute("INSERT INTO t (id) VALUES (1)")
    frozen.reach(START.timestamp() + 86400)
    row = conn.execute(
        "SELECT at, datetime('now'), date(), strftime('%s', 'now'), unixepoch('now'),"
        " datetime('2020-01-01', '+1 day') FROM t"
    ).fetchone()
    conn.close()
    assert row == (
        "2024-03-01 12:00:00",
        "2024-03-02 12:00:00",
        "2024-03-02",
        str(int(START.timestamp()) + 86400),
        int(START.timestamp()) + 86400,
        "2020-01-02 00:00:00",
    )


def test_tenacity_delays_pass_with_the_virtual_sleeps(frozen: FrozenClock) -> None:
    """``stop_after_delay`` sees the waits that took no wall time, as at capture."""
    attempts = []

    @tenacity.retry(stop=tenacity.stop_after_delay(10), wait=tenacity.wait_fixed(4))
    def flaky() -> None:
        attempts.append(datetime.now(UTC))
        raise ConnectionError("down")

    began = time.monotonic()
    with pytest.raises(tenacity.RetryError):
        flaky()
    assert time.monotonic() - began < 2
    assert [(a - START).total_seconds() for a in attempts] == [0, 4, 8, 12]


def test_a_live_process_gets_the_frozen_instant_the_zone_and_a_seed(
    frozen: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    frozen.reach(START.timestamp() + 10)
    variables = live_process_variables(frozen, 7, "mcp:desk")
    assert variables["TZ"] == "America/New_York"
    settings = json.loads(variables[LIVE_VAR])
    assert settings["at"] == START.timestamp() + 10
    assert (
        settings["seed"]
        == json.loads(live_process_variables(frozen, 7, "mcp:desk")[LIVE_VAR])["seed"]
    )
    assert json.loads(live_process_variables(LiveClock(), None, "mcp:desk")[LIVE_VAR]) == {}


def test_a_python_process_started_with_the_variables_runs_frozen() -> None:
    clock = FrozenClock(START)
    env = hook_environment(
        {"PATH": "/usr/bin", **live_process_variables(clock, 3, "x"), "TZ": "America/New_York"}
    )
    script = (
        "import datetime, sqlite3, uuid, random;"
        "print(datetime.datetime.now().isoformat(), datetime.datetime.__module__,"
        " sqlite3.connect(':memory:').execute(\"select datetime('now')\").fetchone()[0],"
        " uuid.uuid4(), random.random(), sep='|')"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .split("|", 3)
        for _ in range(2)
    ]
    local, module, sqlite_now, entropy = runs[0]
    assert local == "2024-03-01T07:00:00.250000" and module == "datetime"
    assert sqlite_now == "2024-03-01 12:00:00"
    assert runs[1][3] == entropy  # seeded: the same uuid4 and random draws each time


def test_langgraph_and_sqlalchemy_run_under_the_frozen_clock(frozen: FrozenClock) -> None:
    """LangGraph subclasses ``datetime`` classes as it is imported (a swapped class made that
    a metaclass conflict); SQLAlchemy's ``DateTime`` column takes the frozen default."""
    from typing import TypedDict

    import sqlalchemy as sa
    from langgraph import graph as lg

    class State(TypedDict):
        n: int

    graph = lg.StateGraph(State)
    graph.add_node("step", lambda state: {"n": state["n"] + 1})
    graph.add_edge(lg.START, "step")
    graph.add_edge("step", lg.END)
    assert graph.compile().invoke({"n": 1}) == {"n": 2}

    engine = sa.create_engine("sqlite://")
    meta = sa.MetaData()
    table = sa.Table(
        "t",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("at", sa.DateTime, default=lambda: dt.datetime.now(UTC).replace(tzinfo=None)),
    )
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert().values(id=1))
        at = conn.execute(sa.select(table.c.at)).scalar()
    engine.dispose()
    assert at == START.replace(tzinfo=None)
