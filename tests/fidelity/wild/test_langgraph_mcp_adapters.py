"""LangGraph with its tools from an MCP server through langchain-mcp-adapters'
``MultiServerMCPClient`` (stdio), the server PyPI's ``mcp-server-sqlite``: the adapters pin
``mcp<2``, so the agent runs on a venv of its own, ``.venv-langgraph-mcp`` (``make
test-deps`` makes it, and so does this module's fixture the first time), captured as
``sandbox capture -- .venv-langgraph-mcp/bin/python langgraph_mcp_returns.py``: mcp 1.x's
``ClientSession`` sends each request itself, and it is recorded there. The returns desk
reads the loan of book 12, due today, over MCP and fines it a day (the due day taken as its
midnight); the fines ledger's ``CHECK`` refuses it. Replayed fully recorded with the server
gone and the model server stopped: reproduced every time; fixed: gone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness
from tests.fidelity.wild.test_langgraph_agents import REFUSED, library
from tests.fidelity.wild.test_wild_agents import AGENTS, assert_gone, edit, model_env

ROOT = Path(__file__).resolve().parents[3]
VENV = ROOT / ".venv-langgraph-mcp"
REQUIREMENTS = (
    "langgraph==1.2.*",
    "langchain-openai==1.7.*",
    "langchain-mcp-adapters==0.3.*",
    "mcp<2",
)
"""As the Makefile's ``test-deps`` installs them, with this project (``-e .``)."""
AGENT = "langgraph_mcp_returns"
QUERY = "SELECT member, due FROM loans WHERE book_id = 12"


@pytest.fixture(scope="module")
def langgraph_mcp_python() -> Path:
    """The venv's ``python``, the venv installed when it is not yet."""
    python = VENV / "bin" / "python"
    if not (VENV / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "pip"), "install", "-q", *REQUIREMENTS, "-e", str(ROOT)]
        subprocess.run(pip, check=True, timeout=900)
        (VENV / ".installed").touch()
    return python


def returns_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Reads the loan with the server's ``read_query``, then says the book is back."""
    if last_tool_results(messages):
        return {"content": "Book 12 is back. Thank you, Ada!"}
    return {"tool_calls": [{"name": "read_query", "arguments": {"query": QUERY}}]}


def test_langgraph_over_mcp_adapters_on_mcp_1_replays_its_fine_with_the_server_gone(
    tmp_path: Path, sqlite_mcp: Path, langgraph_mcp_python: Path
) -> None:
    library(tmp_path, date.today())
    shutil.copy(AGENTS / f"{AGENT}.py", tmp_path)
    server = tmp_path / "mcp-server-sqlite"  # the server as this deployment has it
    server.write_text(f'#!/bin/sh\nexec "{sqlite_mcp}" "$@"\n')
    server.chmod(0o755)
    store = DirectoryStore(tmp_path / "snapshots")
    with harness.model(returns_model) as base:
        done = subprocess.run(
            [
                *(harness.SANDBOX, "capture", "--store", str(store.root), "--name", AGENT),
                *("--", str(langgraph_mcp_python), f"{AGENT}.py"),
            ],
            env={**model_env(base), "SQLITE_MCP": str(server)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    (manifest,) = store.list()
    assert manifest.failure is not None and REFUSED in manifest.failure.reason, done.stderr
    calls = [e for e in store.load_events(manifest.run_id) if isinstance(e, ToolCall)]
    (read,) = [e for e in calls if e.name == "mcp:sqlite/read_query"]
    assert read.args == {"query": QUERY}
    assert read.mcp is not None and read.mcp.transport["kind"] == "stdio"
    (tool,) = [e for e in calls if e.name == "read_query"]  # the LangChain tool around it
    assert tool.args == {"query": QUERY}
    server.unlink()  # the server is gone
    library(tmp_path, date.today() + timedelta(days=7))  # and the live row moved on

    result = harness.replay(store, manifest.run_id, times=2)
    harness.assert_reproduced_every_time(result, times=2)
    assert result.report["divergences"] == [None, None], result.output

    edit(
        tmp_path,
        AGENT,
        'datetime.fromisoformat(loan["due"])',
        '(datetime.fromisoformat(loan["due"]) + timedelta(days=1))',
    )
    assert_gone(harness.replay(store, manifest.run_id, times=1))
