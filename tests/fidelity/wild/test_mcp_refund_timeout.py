"""A refund agent on a real MCP server (``agents/refund_server.py``, the ``mcp`` SDK's
``MCPServer`` over stdio) started as the venv's ``python``, replayed with it started as
``python3``: the first refund times out after it had committed, the agent's ``except
MCPError`` retries, and order 7 is refunded twice. The refunds are rows in a SQLite file
that only the server process opens: the capture finds it there and captures it. Replayed
fully recorded (the server and the model stopped), the recorded timeout comes back as the
SDK's ``MCPError``, so the retry runs again: reproduced every time; the fixed agent (it
looks before it retries) makes the failure go; a crash is inconclusive. Captured both ways:
in ``with capture.run(..., entrypoint=...)`` (``refund_agent.capture_into``), and zero-code
(``sandbox capture --fail-if 'result:refund_requests > 1' -- python -m ...refund_agent``,
replayed as that command on the venv's ``python``)."""

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
def by_capture_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """The agent captured in ``capture.run`` as it runs on the venv's ``python``."""
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
    yield from _moved_on(store, done.stdout.split()[-1], db)


@pytest.fixture(scope="module")
def zero_code(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """``sandbox capture --services auto --fail-if ... -- python -m ...refund_agent``."""
    tmp = tmp_path_factory.mktemp("refund-timeout-zero-code")
    store = DirectoryStore(tmp / "store")
    db = tmp / "refunds.db"
    env = {**os.environ, "REFUNDS_DB": str(db), "REFUND_CONFIRM_SECONDS": "20"}
    done = subprocess.run(
        [
            *(str(BIN / "python"), "-m", "cli.main", "capture", "--name", "refund"),
            *("--store", str(store.root), "--services", "auto"),
            *("--fail-if", "result:refund_requests > 1", "--", str(BIN / "python"), "-m", AGENT),
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
    assert manifest.failure is not None and manifest.failure.observed, manifest.failure
    yield from _moved_on(store, manifest.run_id, db)


def _moved_on(store: DirectoryStore, run_id: str, db: Path) -> Iterator[Captured]:
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (2,)
    conn.close()
    db.unlink()  # production moved on: nothing of the capture's state is left
    with environ(REFUNDS_DB=str(db)):
        yield store, run_id, db


@pytest.fixture(params=["by_capture_run", "zero_code"])
def captured(request: pytest.FixtureRequest) -> Captured:
    """The run captured each way."""
    found: Captured = request.getfixturevalue(request.param)
    return found


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
    assert touched.endpoint == str(captured[2])  # opened by the server, a child process
    (state,) = [s for s in manifest.services if s.name == touched.service]
    assert state.before is not None and state.after is not None
    assert state.before.sha256 != state.after.sha256  # the two refunds are in the end state


def test_fully_recorded_replay_on_python3_reproduces_every_time(captured: Captured) -> None:
    store, run_id, db = captured
    report = replay3(store, run_id, times=2)
    assert report["exit_code"] == 1, report
    assert (report["verdict"]["reproduced"], report["verdict"]["total"]) == (2, 2), report
    assert report["divergences"] == [None, None], report["divergences"]
    assert not any("stand-in" in note for note in report["notes"]), report["notes"]
    assert not db.exists()  # the server never started: nothing opened its database
    replayed = [e for e in store.load_events(report["replays"][0]) if isinstance(e, ToolCall)]
    refunds = [e for e in replayed if e.name == f"mcp:{SERVER}/refund"]
    assert [e.error is not None for e in refunds] == [True, False]  # the retry ran again


def test_live_the_server_started_as_python3_is_the_recorded_one(
    by_capture_run: Captured,
) -> None:
    """``--live mcp:refund-desk``: the server is started as ``python3`` and recognized as
    the recorded ``python`` one; its SQLite is the restored one, not the production path."""
    store, run_id, db = by_capture_run
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
    assert "forced crash after the first attempt" in json.dumps(report), report
