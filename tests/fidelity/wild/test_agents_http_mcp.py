"""An OpenAI Agents SDK agent whose stock comes from a real MCP server over HTTP
(``agents.mcp.MCPServerStreamableHttp``, and ``MCPServerSse`` for SSE; the server is the
``mcp`` SDK's ``MCPServer``, started here on 127.0.0.1 with its stock in a SQLite file),
captured both ways (:mod:`tests.fidelity.wild.corpus`: ``sandbox capture -- python
agents_http_stock.py``, and with ``@capture.run`` on its ``main``) and replayed with
``sandbox replay RUN --json`` with the server and the model stopped and the stock changed
since."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.events import HTTPExchange, LLMCall, ToolCall
from tests.fidelity import harness
from tests.fidelity.wild.corpus import (
    AGENTS,
    STYLES,
    assert_gone,
    assert_inconclusive,
    captured,
    edit,
    model_env,
)

AGENT = "agents_http_stock"
SERVER = "warehouse"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def warehouse(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The warehouse's MCP server on 127.0.0.1 (its URL and process): lamps 4 on hand, 3 of
    them held."""
    db = tmp_path / "stock.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE stock (sku TEXT PRIMARY KEY, on_hand INT, held INT)")
        conn.execute("INSERT INTO stock VALUES ('lamp', 4, 3)")
    conn.close()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(AGENTS / "agents_http_stock_server.py"), str(port), request.param],
        env={**harness.base_env(), "STOCK_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None and time.monotonic() < deadline, "no server"
            time.sleep(0.1)
        path = "sse" if request.param == "sse" else "mcp"
        yield f"http://127.0.0.1:{port}/{path}", process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


def stock_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Looks the lamps up, then promises them today when enough are on hand (held or not)."""
    done = last_tool_results(messages)
    if not done:
        return {"tool_calls": [{"name": "stock", "arguments": {"sku": "lamp"}}]}
    found = re.search(r"on_hand\W+(\d+)", done[-1])  # the SDK's text of the tool's result
    assert found, done[-1]
    promise = {"sku": "lamp", "units": 3, "ships_today": int(found.group(1)) >= 3}
    return {"content": json.dumps(promise)}


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("warehouse", ["streamable-http", "sse"], indirect=True)
def test_agents_sdk_over_http_mcp_replays_its_promise_of_held_stock(
    tmp_path: Path, warehouse: tuple[str, subprocess.Popen[bytes]], style: str
) -> None:
    """4 lamps on hand, 3 held for open orders: the model promises 3 today and the order code
    refuses it. The server's requests are MCP events carrying its URL, not ``http`` or model
    exchanges. Replayed fully recorded with the server stopped and the stock released since
    (``held`` 0): reproduced every time; the fixed script (it ships today only what is free)
    makes it go; a crash before booking is inconclusive and named."""
    with harness.model(stock_model) as base:
        url, server = warehouse
        run = captured(style, tmp_path, AGENT, {**model_env(base), "STOCK_MCP_URL": url})
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "only 1 are free" in run.manifest.failure.reason
    calls = [e for e in run.events if isinstance(e, ToolCall) and e.mcp is not None]
    assert f"mcp:{SERVER}/stock" in [e.name for e in calls]
    assert {e.mcp.transport["url"] for e in calls if e.mcp is not None} == {url}
    assert [
        e.url for e in run.events if isinstance(e, HTTPExchange) and e.url.startswith(url)
    ] == []
    assert all(e.model == "scripted-1" for e in run.events if isinstance(e, LLMCall))
    with sqlite3.connect(tmp_path / "stock.db") as conn:
        conn.execute("UPDATE stock SET held = 0")
    conn.close()
    server.terminate()
    server.wait(timeout=10)

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id, times=2), times=2)

    edit(
        tmp_path,
        AGENT,
        '    free = level["on_hand"] - level["held"]\n',
        '    free = level["on_hand"] - level["held"]\n'
        "    promised.ships_today = promised.ships_today and promised.units <= free\n",
    )
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    signature = "def book(promised: Promise, level: dict) -> None:\n"
    edit(tmp_path, AGENT, signature, signature + '    raise OSError("order desk down")\n')
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")
