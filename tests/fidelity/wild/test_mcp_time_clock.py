"""A support agent on PyPI's ``mcp-server-time`` through the ``mcp`` SDK's ``ClientSession``:
the server answers the time in Tokyo with its UTC offset, and the agent subtracts it from a
naive ``datetime.now()`` (a ``TypeError``). The server is matched by its command, its
``--local-timezone Asia/Tokyo`` kept whole. Captured both ways: in ``with capture.run(...,
entrypoint=...)`` around its ``main``, and zero-code (``sandbox capture -- python -m
...desk_hours_agent``). Replayed fully recorded (the server and the model stopped, the clock
frozen): reproduced every time; fixed (counting from the server's recorded time): gone,
with the minutes the recorded clock gives; crashed: inconclusive."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.capture.mcp import recorded_result, transport_key
from sandbox.replay import replay
from sandbox.snapshot.events import FinalResult, ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity.wild.agents import desk_hours_agent
from tests.fidelity.wild.corpus import capture_module

ROOT = Path(__file__).resolve().parents[3]
AGENT = "tests.fidelity.wild.agents.desk_hours_agent"
SERVER = "mcp-time"


@dataclass
class Captured:
    store: DirectoryStore
    run_id: str
    times: int
    """How many replays show it reproduced (2 for the zero-code capture: each is a process)."""


@pytest.fixture(scope="module", params=["capture.run", "zero-code"])
def captured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Captured:
    store = DirectoryStore(tmp_path_factory.mktemp("mcp-time") / "store")
    if request.param == "zero-code":
        run = capture_module(store, "desk-hours", AGENT, os.environ)
        assert run.exit_code == 1, run.output
        return Captured(store, run.run_id, 2)
    settings = capture.run(
        "desk-hours",
        store=store,
        seed=9,
        entrypoint=Entrypoint(kind="callable", target=f"{AGENT}:main", cwd=str(ROOT)),
        packages=False,
    )
    with pytest.raises(TypeError, match="offset-naive and offset-aware"), settings as rec:
        desk_hours_agent.main()
    return Captured(store, rec.run_id, 3)


def _tokyo_now(store: DirectoryStore, run_id: str) -> datetime:
    (call,) = [
        e
        for e in store.load_events(run_id)
        if isinstance(e, ToolCall) and e.name == f"mcp:{SERVER}/get_current_time"
    ]
    return datetime.fromisoformat(
        recorded_result(call, store.get_blob)["structuredContent"]["datetime"]
    )


def test_the_server_is_recorded_with_its_command_arguments_whole(captured: Captured) -> None:
    store, run_id = captured.store, captured.run_id
    manifest = store.load_manifest(run_id)
    assert manifest.failure is not None and "TypeError" in manifest.failure.reason
    call = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)][-1]
    assert call.name == f"mcp:{SERVER}/get_current_time"
    assert call.mcp is not None
    assert transport_key(call.mcp.transport).endswith("mcp-server-time --local-timezone Asia/Tokyo")


def test_fully_recorded_replay_reproduces_every_time(captured: Captured) -> None:
    store, run_id, k = captured.store, captured.run_id, captured.times
    report = replay(run_id, store=store, times=k)
    assert report.verdict.reproduced == k and report.verdict.total == k, report.describe()
    assert report.divergences == [None] * k, report.describe()
    assert report.exit_code == 1


def test_the_fixed_agent_counts_from_the_recorded_clock(captured: Captured) -> None:
    store, run_id = captured.store, captured.run_id
    report = replay(run_id, store=store, times=3, entrypoint=f"{AGENT}:main_fixed")
    assert report.verdict.gone == 3 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 0
    tokyo = _tokyo_now(store, run_id)
    closes = tokyo.replace(hour=18, minute=0, second=0)
    closes += timedelta(days=1) if closes < tokyo else timedelta()
    expected = int((closes - tokyo).total_seconds() // 60)
    for replayed in report.replays:
        (result,) = [e for e in store.load_events(replayed) if isinstance(e, FinalResult)]
        assert result.value == {"minutes_left": expected}


def test_a_crash_is_inconclusive(captured: Captured) -> None:
    store, run_id = captured.store, captured.run_id
    report = replay(run_id, store=store, times=1, entrypoint=f"{AGENT}:main_crash")
    (run,) = report.verdict.runs
    assert run.outcome == "inconclusive", report.describe()
    assert report.exit_code == 2
    assert "forced crash before the time was asked" in report.describe()
