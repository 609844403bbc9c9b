"""A refund agent on a real MCP server (``agents/refund_server.py``, the ``mcp`` SDK's
``MCPServer`` over stdio) started as the venv's ``python``, replayed with it started as
``python3``: the first refund times out after it had committed, the agent's ``except
MCPError`` retries, and order 7 is refunded twice. The refunds are rows in a SQLite file
that only the server process opens: the capture finds it there and captures it. Replayed
fully recorded (the server and the model stopped), the recorded timeout comes back as the
SDK's ``MCPError``, so the retry runs again: reproduced every time; the fixed agent (it
looks before it retries) makes the failure go; a crash is inconclusive."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.capture_demo import environ
from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity.wild.agents import refund_agent

ROOT = Path(__file__).resolve().parents[3]
AGENT = "tests.fidelity.wild.agents.refund_agent"
SERVER = "refund-desk"
TWICE = capture.ResultPredicate(path="refund_requests", op="gt", value=1)
PYTHON = Path(sys.executable)
Captured = tuple[DirectoryStore, str, Path]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    tmp = tmp_path_factory.mktemp("refund-timeout")
    store = DirectoryStore(tmp / "store")
    db = tmp / "refunds.db"
    python = PYTHON.with_name("python")
    with environ(REFUNDS_DB=str(db), REFUND_CONFIRM_SECONDS="20", REFUND_PYTHON=str(python)):
        settings = capture.run(
            "refund-timeout",
            store=store,
            seed=5,
            entrypoint=Entrypoint(kind="callable", target=f"{AGENT}:main", cwd=str(ROOT)),
            packages=False,
        )
        with settings as rec:
            result = refund_agent.main()
            assert result["refund_requests"] == 2
            rec.mark_failed("order 7 was refunded twice", TWICE)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (2,)
    db.unlink()  # production moved on: nothing of the capture's state is left
    with environ(REFUNDS_DB=str(db), REFUND_PYTHON=str(PYTHON.with_name("python3"))):
        yield store, rec.run_id, db


def test_the_timeout_is_recorded_as_the_sdk_error_and_the_servers_sqlite_is_captured(
    captured: Captured,
) -> None:
    store, run_id, _ = captured
    calls = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    refunds = [e for e in calls if e.name == f"mcp:{SERVER}/refund"]
    assert [e.error is not None for e in refunds] == [True, False]
    error = refunds[0].error
    assert error is not None and error.type == "mcp.shared.exceptions.MCPError"
    assert error.attrs["error"]["value"]["code"] == -32001  # type: ignore[index, call-overload]
    manifest = store.load_manifest(run_id)
    (touched,) = [t for t in manifest.touched if t.kind == "sqlite"]
    assert touched.clients == ["sqlite3"] and touched.service is not None
    (state,) = [s for s in manifest.services if s.name == touched.service]
    assert state.before is not None and state.after is not None
    assert state.before.sha256 != state.after.sha256  # the two refunds are in the end state


def test_fully_recorded_replay_with_python3_reproduces_every_time(captured: Captured) -> None:
    store, run_id, db = captured
    report = replay(run_id, store=store, times=3)
    assert report.verdict.reproduced == 3 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 1
    assert not any("stand-in" in note for note in report.notes), report.notes
    assert not db.exists()  # the server never started: nothing opened its database
    replayed = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)]
    refunds = [e for e in replayed if e.name == f"mcp:{SERVER}/refund"]
    assert [e.error is not None for e in refunds] == [True, False]  # the retry ran again


def test_the_fixed_agent_makes_the_failure_go(captured: Captured) -> None:
    store, run_id, _ = captured
    report = replay(run_id, store=store, times=3, entrypoint=f"{AGENT}:main_fixed")
    assert report.verdict.gone == 3 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 0


def test_a_crash_is_inconclusive(captured: Captured) -> None:
    store, run_id, _ = captured
    report = replay(run_id, store=store, times=1, entrypoint=f"{AGENT}:main_crash")
    (run,) = report.verdict.runs
    assert run.outcome == "inconclusive", report.describe()
    assert report.exit_code == 2


def test_sandbox_capture_finds_the_sqlite_the_server_process_opens(tmp_path: Path) -> None:
    """``sandbox capture --services auto -- python -m ...refund_agent``: the SQLite file is
    opened by the MCP server, a child of the program, and is captured into the run."""
    store = DirectoryStore(tmp_path / "store")
    db = tmp_path / "refunds.db"
    env = {**os.environ, "REFUNDS_DB": str(db), "REFUND_CONFIRM_SECONDS": "20"}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "cli.main", "capture", "--name", "refund"),
            *("--store", str(store.root), "--services", "auto"),
            *("--", sys.executable, "-m", AGENT),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (manifest,) = store.list()
    (touched,) = [t for t in manifest.touched if t.kind == "sqlite"]
    assert touched.endpoint == str(db) and touched.service is not None
    (state,) = [s for s in manifest.services if s.name == touched.service]
    assert state.before is not None and state.after is not None
    assert state.before.sha256 != state.after.sha256
