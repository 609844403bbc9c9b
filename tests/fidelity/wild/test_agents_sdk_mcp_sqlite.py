"""An OpenAI Agents SDK agent whose database tools come from PyPI's ``mcp-server-sqlite``
(mcp 1.x, in a venv of its own) through the SDK's own MCP client, ``MCPServerStdio`` (on
mcp 2.x it connects through mcp's v2 ``Client``, not ``ClientSession``). The agent refunds
the cancelled line too: the bug is in the server's SQLite rows as the agent reads them.
Captured both ways (in ``with capture.run(..., entrypoint=...)`` around its ``main``, and
zero-code: ``sandbox capture --fail-if 'result:refund_cents > 4200' -- python -m
...shop_refund_agent``), the server's requests are named after it and carry its transport,
and the SQLite file the server process opens is found and captured; replayed fully
recorded (the server and the model stopped): reproduced every time; fixed: gone; crashed:
inconclusive."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.capture_demo import environ
from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity.wild.agents import shop_refund_agent
from tests.fidelity.wild.corpus import capture_module

ROOT = Path(__file__).resolve().parents[3]
AGENT = "tests.fidelity.wild.agents.shop_refund_agent"
SERVER = "sqlite"
"""The slug of ``mcp-server-sqlite``'s ``serverInfo.name``."""
OVERPAID = capture.ResultPredicate(path="refund_cents", op="gt", value=4200)
OVERPAID_IF = "result:refund_cents > 4200"
"""The same, as ``sandbox capture --fail-if`` takes it."""


@dataclass
class Captured:
    store: DirectoryStore
    run_id: str
    db: Path
    times: int
    """How many replays show it reproduced (2 for the zero-code capture: each is a process)."""


@pytest.fixture(scope="module", params=["capture.run", "zero-code"])
def captured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sqlite_mcp: Path
) -> Iterator[Captured]:
    tmp = tmp_path_factory.mktemp("agents-sdk-sqlite")
    store = DirectoryStore(tmp / "store")
    db = tmp / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE lines (order_id int, item text, cents int, status text)")
        conn.executemany(
            "INSERT INTO lines VALUES (?, ?, ?, ?)",
            [(7, "lamp", 4200, "delivered"), (7, "shade", 1500, "cancelled")],
        )
    with environ(SQLITE_MCP=str(sqlite_mcp), SHOP_DB=str(db)):
        if request.param == "zero-code":
            run = capture_module(store, "agents-sdk-sqlite", AGENT, os.environ, fail_if=OVERPAID_IF)
            assert run.manifest.failure is not None and run.manifest.failure.observed, run.output
            run_id, times = run.run_id, 2
        else:
            settings = capture.run(
                "agents-sdk-sqlite",
                store=store,
                seed=3,
                entrypoint=Entrypoint(kind="callable", target=f"{AGENT}:main", cwd=str(ROOT)),
                packages=False,
            )
            with settings as rec:
                assert shop_refund_agent.main()["refund_cents"] == 5700
                rec.mark_failed("order 7 was refunded 57.00, the customer paid 42.00", OVERPAID)
            run_id, times = rec.run_id, 3
        db.unlink()  # production moved on
        yield Captured(store, run_id, db, times)


def test_the_sdk_client_is_recorded_with_its_server_and_transport(captured: Captured) -> None:
    store, run_id = captured.store, captured.run_id
    calls = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    names = [e.name for e in calls]
    assert f"mcp:{SERVER}:initialize" in names and f"mcp:{SERVER}:tools/list" in names
    assert names[0] == f"mcp:{SERVER}:server/discover"  # refused by a handshake-era server
    assert calls[0].error is not None
    (read,) = [e for e in calls if e.name == f"mcp:{SERVER}/read_query"]
    assert read.mcp is not None and read.mcp.transport["kind"] == "stdio"
    assert "mcp:?" not in "".join(names)
    manifest = store.load_manifest(run_id)
    (touched,) = [t for t in manifest.touched if t.kind == "sqlite"]
    assert touched.service is not None  # opened by the server process, captured here
    (state,) = [s for s in manifest.services if s.name == touched.service]
    assert state.before is not None and state.after is not None


def test_fully_recorded_replay_reproduces_every_time(captured: Captured) -> None:
    store, run_id, k = captured.store, captured.run_id, captured.times
    report = replay(run_id, store=store, times=k)
    assert report.verdict.reproduced == k and report.verdict.total == k, report.describe()
    assert report.exit_code == 1
    assert report.divergences == [None] * k, report.describe()
    assert not captured.db.exists()  # the server never ran


def test_the_fixed_agent_makes_the_failure_go(captured: Captured) -> None:
    store, run_id = captured.store, captured.run_id
    report = replay(run_id, store=store, times=3, entrypoint=f"{AGENT}:main_fixed")
    assert report.verdict.gone == 3 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 0


def test_a_crash_is_inconclusive(captured: Captured) -> None:
    store, run_id = captured.store, captured.run_id
    report = replay(run_id, store=store, times=1, entrypoint=f"{AGENT}:main_crash")
    (run,) = report.verdict.runs
    assert run.outcome == "inconclusive", report.describe()
    assert report.exit_code == 2
    assert "forced crash once the model has answered" in report.describe()
