"""LangGraph with its tools from an MCP server through langchain-mcp-adapters'
``MultiServerMCPClient`` (stdio), the server PyPI's ``mcp-server-sqlite``: the adapters pin
``mcp<2``, so the agent runs on a venv of its own, ``.venv-langgraph-mcp`` (``make
test-deps`` makes it, and so does this module's fixture the first time), captured both ways
(:mod:`tests.fidelity.wild.corpus`: ``sandbox capture -- .venv-langgraph-mcp/bin/python
langgraph_mcp_returns.py``, and with ``@capture.run`` on its ``main``): mcp 1.x's
``ClientSession`` sends each request itself, and it is recorded there. The returns desk
reads the loan of book 12, due today, over MCP and fines it a day (the due day taken as its
midnight); the fines ledger's ``CHECK`` refuses it. Replayed fully recorded with the server
gone and the model server stopped: reproduced every time; fixed: gone; crashed:
inconclusive."""

from __future__ import annotations

import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.events import ToolCall
from tests.fidelity import harness
from tests.fidelity.wild.corpus import (
    STYLES,
    assert_gone,
    assert_inconclusive,
    captured,
    edit,
    model_env,
)
from tests.fidelity.wild.test_langgraph_agents import REFUSED, library

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


@pytest.mark.parametrize("style", STYLES)
def test_langgraph_over_mcp_adapters_on_mcp_1_replays_its_fine_with_the_server_gone(
    tmp_path: Path, sqlite_mcp: Path, langgraph_mcp_python: Path, style: str
) -> None:
    library(tmp_path, date.today())
    server = tmp_path / "mcp-server-sqlite"  # the server as this deployment has it
    server.write_text(f'#!/bin/sh\nexec "{sqlite_mcp}" "$@"\n')
    server.chmod(0o755)
    with harness.model(returns_model) as base:
        env = {**model_env(base), "SQLITE_MCP": str(server)}
        run = captured(style, tmp_path, AGENT, env, python=str(langgraph_mcp_python))
    manifest = run.manifest
    assert manifest.failure is not None and REFUSED in manifest.failure.reason, run.output
    calls = [e for e in run.events if isinstance(e, ToolCall)]
    (read,) = [e for e in calls if e.name == "mcp:sqlite/read_query"]
    assert read.args == {"query": QUERY}
    assert read.mcp is not None and read.mcp.transport["kind"] == "stdio"
    (tool,) = [e for e in calls if e.name == "read_query"]  # the LangChain tool around it
    assert tool.args == {"query": QUERY}
    server.unlink()  # the server is gone
    library(tmp_path, date.today() + timedelta(days=7))  # and the live row moved on

    result = harness.replay(run.store, run.run_id, times=2)
    harness.assert_reproduced_every_time(result, times=2)
    assert result.report["divergences"] == [None, None], result.output

    edit(
        tmp_path,
        AGENT,
        'datetime.fromisoformat(loan["due"])',
        '(datetime.fromisoformat(loan["due"]) + timedelta(days=1))',
    )
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    signature = "def settle(book_id: int, loan: dict) -> None:\n"
    edit(tmp_path, AGENT, signature, signature + '    raise OSError("ledger down")\n')
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")
