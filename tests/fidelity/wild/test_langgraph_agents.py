"""A LangGraph ``create_react_agent`` on ``ChatOpenAI``, captured as a user does (see
``corpus.py``): the library's returns desk checks book 12 in on the day it is due,
and its circulation code fines it a day (the due day is taken as its midnight); the fines
ledger's ``CHECK (returned_on > due)`` refuses the fine. The loan is a row of the agent's own
``library.db``, the check-in stamped with its clock: after the capture the live row is due
next week and the book not yet back, and the replay (model server stopped) reads the
captured row at the captured time."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness
from tests.fidelity.wild.corpus import (
    AGENTS,
    assert_gone,
    assert_inconclusive,
    capture,
    edit,
    model_env,
)

REFUSED = "CHECK constraint failed: returned_on > due"
FIX = ("datetime.fromisoformat(due)", "(datetime.fromisoformat(due) + timedelta(days=1))")


def returns_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Looks the loan up, checks the book in, then says so."""
    done = sum(1 for m in messages if m.get("role") == "tool")
    if done == 0:
        return {"tool_calls": [{"name": "loan", "arguments": {"book_id": 12}}]}
    if done == 1:
        return {"tool_calls": [{"name": "check_in", "arguments": {"book_id": 12}}]}
    return {"content": "Book 12 is checked in. Thank you, Ada!"}


def library(folder: Path, due: date) -> None:
    with sqlite3.connect(folder / "library.db") as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS loans"
            " (book_id INTEGER PRIMARY KEY, member TEXT, due TEXT, returned_at TEXT)"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS fines (book_id INTEGER, member TEXT, cents INTEGER,"
            " due TEXT, returned_on TEXT, CHECK (returned_on > due))"
        )
        conn.execute("INSERT OR REPLACE INTO loans VALUES (12, 'ada', ?, NULL)", (str(due),))
    conn.close()


def check_ins(events: list[Any]) -> list[str]:
    return [str(e.output) for e in events if getattr(e, "name", None) == "check_in"]


def test_langgraph_agent_captured_as_a_command_replays_its_fine_on_the_due_day(
    tmp_path: Path,
) -> None:
    library(tmp_path, date.today())
    with harness.model(returns_model) as base:
        run = capture(tmp_path, "langgraph_returns", model_env(base))
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert REFUSED in run.manifest.failure.reason
    names = [getattr(e, "name", None) for e in run.events]
    assert "loan" in names and "check_in" in names  # LangGraph's ToolNode ran them
    library(tmp_path, date.today() + timedelta(days=7))  # the live row moved on

    result = harness.replay(run.store, run.run_id)
    harness.assert_reproduced_every_time(result)
    for events in harness.replayed_runs(run.store, result):  # checked in at the captured time
        assert check_ins(events) == check_ins(run.events)

    edit(tmp_path, "langgraph_returns", *FIX)
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    signature = "def settle(book_id: int) -> None:\n"
    edit(tmp_path, "langgraph_returns", signature, signature + '    raise OSError("ledger down")\n')
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")


def test_langgraph_agent_awaited_inside_capture_run_replays_its_fine(tmp_path: Path) -> None:
    """``python langgraph_returns_service.py 12 Ada``: the service opens ``capture.run``
    around ``agent.ainvoke`` itself (LangGraph runs the sync tools on its executor). (The
    fix is the one above.)"""
    library(tmp_path, date.today())
    for path in AGENTS.glob("langgraph_returns*.py"):
        (tmp_path / path.name).write_text(path.read_text())
    with harness.model(returns_model) as base:
        done = subprocess.run(
            [sys.executable, "langgraph_returns_service.py", "12", "Ada"],
            cwd=tmp_path,
            env=model_env(base),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    store = DirectoryStore(tmp_path / "snapshots")
    (run_id,) = [p.name for p in store.runs_dir.iterdir()]
    manifest = store.load_manifest(run_id)
    assert manifest.failure is not None and REFUSED in manifest.failure.reason, done.stderr
    library(tmp_path, date.today() + timedelta(days=7))

    harness.assert_reproduced_every_time(harness.replay(store, run_id))
