"""A refund agent on a real MCP server (``agents/refund_server.py``, the ``mcp`` SDK's
``MCPServer`` over stdio) started as the venv's ``python``, replayed with it started as
``python3``: the first refund times out after it had committed, the agent's ``except
MCPError`` retries, and order 7 is refunded twice. The refunds are rows in a SQLite file
that only the server process opens: the capture finds it there and captures it. Replayed
fully recorded (the server and the model stopped), the recorded timeout comes back as the
SDK's ``MCPError``, so the retry runs again: reproduced every time; the fixed agent (it
looks before it retries) makes the failure go; a crash is inconclusive."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.capture_demo import environ
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[3]
AGENT = "tests.fidelity.wild.agents.refund_agent"
SERVER = "refund-desk"
BIN = Path(sys.executable).parent
Captured = tuple[DirectoryStore, str, Path]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """The agent captured as it runs on the venv's ``python``."""
    tmp = tmp_path_factory.mktemp("refund-timeout")
    store = DirectoryStore(tmp / "store")
    db = tmp / "refunds.db"
    env = {**os.environ, "REFUNDS_DB": str(db), "REFUND_CONFIRM_SECONDS": "20"}
    done = subprocess.run(
        [str(BIN / "python"), "-m", AGENT, "capture", str(store.root)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    run_id = done.stdout.split()[-1]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (2,)
    db.unlink()  # production moved on: nothing of the capture's state is left
    with environ(REFUNDS_DB=str(db)):
        yield store, run_id, db


def replay3(store: DirectoryStore, run_id: str, *extra: str, times: int = 3) -> dict[str, Any]:
    """``python3 -m cli.main replay RUN --json``: the agent replayed on ``python3``."""
    done = subprocess.run(
        [
            *(str(BIN / "python3"), "-m", "cli.main", "replay", run_id),
            *("--store", str(store.root), "--times", str(times), "--json", *extra),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    start = done.stdout.find("{\n")
    assert start >= 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout[start:])
    report["exit_code"] = done.returncode
    return report


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
    assert refunds[0].mcp is not None
    assert refunds[0].mcp.transport["command"][0] == str(BIN / "python")  # type: ignore[index]
    manifest = store.load_manifest(run_id)
    (touched,) = [t for t in manifest.touched if t.kind == "sqlite"]
    assert touched.clients == ["sqlite3"] and touched.service is not None
    (state,) = [s for s in manifest.services if s.name == touched.service]
    assert state.before is not None and state.after is not None
    assert state.before.sha256 != state.after.sha256  # the two refunds are in the end state


def test_fully_recorded_replay_on_python3_reproduces_every_time(captured: Captured) -> None:
    store, run_id, db = captured
    report = replay3(store, run_id)
    assert report["exit_code"] == 1, report
    assert (report["verdict"]["reproduced"], report["verdict"]["total"]) == (3, 3), report
    assert not any("stand-in" in note for note in report["notes"]), report["notes"]
    assert not db.exists()  # the server never started: nothing opened its database
    replayed = [e for e in store.load_events(report["replays"][0]) if isinstance(e, ToolCall)]
    refunds = [e for e in replayed if e.name == f"mcp:{SERVER}/refund"]
    assert [e.error is not None for e in refunds] == [True, False]  # the retry ran again


def test_live_the_server_started_as_python3_is_the_recorded_one(captured: Captured) -> None:
    """``--live mcp:refund-desk``: the server is started as ``python3`` and recognized as
    the recorded ``python`` one; its SQLite is the restored one, not the production path."""
    store, run_id, db = captured
    report = replay3(store, run_id, "--live", f"mcp:{SERVER}", times=1)
    assert report["mismatch"] is None, report
    assert report["verdict"]["reproduced"] == 1, report
    assert not db.exists()
    replayed = [e for e in store.load_events(report["replays"][0]) if isinstance(e, ToolCall)]
    (listed,) = [e for e in replayed if e.name == f"mcp:{SERVER}/refunds"]
    assert listed.mcp is not None
    assert listed.mcp.transport["command"][0] == str(BIN / "python3")  # type: ignore[index]


def test_the_fixed_agent_makes_the_failure_go(captured: Captured) -> None:
    store, run_id, _ = captured
    report = replay3(store, run_id, "--entrypoint", f"{AGENT}:main_fixed")
    assert report["exit_code"] == 0, report
    assert (report["verdict"]["gone"], report["verdict"]["total"]) == (3, 3), report


def test_a_crash_is_inconclusive(captured: Captured) -> None:
    store, run_id, _ = captured
    report = replay3(store, run_id, "--entrypoint", f"{AGENT}:main_crash", times=1)
    assert report["exit_code"] == 2, report
    assert [r["outcome"] for r in report["verdict"]["runs"]] == ["inconclusive"], report


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
