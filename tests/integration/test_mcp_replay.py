"""An agent whose tools come from a real MCP server (the official ``mcp`` SDK) reading a
real Postgres: captured with no change to the agent, replayed from the recording without
starting or reaching the server, and replayed live against the restored database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from examples.capture_demo import environ, production_db
from sandbox import capture
from sandbox.capture.mcp import recorded_result
from sandbox.replay import replay
from sandbox.replay.serving.policy import PolicySet
from sandbox.services.registry import get_kind
from sandbox.snapshot.events import HTTPExchange, ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
SERVER = "orders-desk"
"""The slug of the server's ``serverInfo.name`` (``orders desk``)."""
Captured = tuple[DirectoryStore, str, Path]
"""The store, the captured run and the file the server appends its pid to when it starts."""
CANCELLED = capture.ResultPredicate(path="answer", op="contains", value="cancelled")


def _seed(url: str) -> None:
    from examples.mcp_server import SCHEMA

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute("INSERT INTO orders VALUES (7, 'blue widget', 'cancelled')")


def _capture(store: DirectoryStore, target: str, run: object, url: str) -> str:
    settings = capture.run(
        "mcp-orders",
        store=store,
        seed=7,
        services=[capture.ServiceSpec("db", "postgres", url, env="DATABASE_URL")],
        entrypoint=Entrypoint(kind="callable", target=target, cwd=str(ROOT)),
        packages=False,
    )
    with settings as rec:
        assert callable(run)
        answer = run()
        assert "cancelled" in answer
        rec.mark_failed("the customer was told order 7 is cancelled", CANCELLED)
    # Production moves on: only the restored state still says "cancelled".
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE orders SET status = 'shipped'")
    return rec.run_id


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_http(url: str, port: int, marker: Path) -> subprocess.Popen[bytes]:
    env = {"DATABASE_URL": url, "MCP_MARKER": str(marker), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "examples.mcp_server", "http", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the MCP HTTP server did not start")


def _result(store: DirectoryStore, event: ToolCall) -> Any:
    return recorded_result(event, store.get_blob)


def _marks(marker: Path, what: str) -> int:
    """How many times the server wrote ``what`` (``start`` or ``call``) to the marker."""
    lines = marker.read_text().splitlines() if marker.exists() else []
    return sum(1 for line in lines if line.split()[0] == what)


def _starts(marker: Path) -> int:
    return _marks(marker, "start")


@pytest.fixture(scope="module")
def stdio_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Captured]:
    from examples import mcp_agent

    tmp = tmp_path_factory.mktemp("mcp-stdio")
    store = DirectoryStore(tmp / "store")
    marker = tmp / "server-starts"
    with production_db() as url, environ(DATABASE_URL=url, MCP_MARKER=str(marker)):
        _seed(url)
        run_id = _capture(store, "examples.mcp_agent:main", mcp_agent.main, url)
    assert _starts(marker) == 1
    marker.unlink()
    with environ(MCP_MARKER=str(marker)):
        yield store, run_id, marker


@pytest.fixture(scope="module")
def http_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Captured]:
    from examples import mcp_agent

    tmp = tmp_path_factory.mktemp("mcp-http")
    store = DirectoryStore(tmp / "store")
    marker = tmp / "server-starts"
    port = _free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    with production_db() as url, environ(DATABASE_URL=url, ORDERS_MCP_URL=mcp_url):
        _seed(url)
        server = _serve_http(url, port, marker)
        try:
            run_id = _capture(store, "examples.mcp_agent:main_http", mcp_agent.main_http, url)
        finally:
            server.terminate()
            server.wait(10)
    assert _starts(marker) == 1
    with environ(ORDERS_MCP_URL=mcp_url):
        yield store, run_id, marker


@pytest.fixture
def restored_http_server(http_run: Captured) -> Iterator[str]:
    """A Postgres holding the captured state and the MCP server over it, at the agent's
    ``ORDERS_MCP_URL``; yields the database's URL (the replay's service, as the runner
    container is given its services)."""
    store, run_id, marker = http_run
    before = store.load_manifest(run_id).services[0].before
    assert before is not None
    port = int(os.environ["ORDERS_MCP_URL"].split(":")[2].split("/")[0])
    with production_db() as url:
        get_kind("postgres").restore(url, store.get_blob(before.sha256))
        server = _serve_http(url, port, marker)
        try:
            yield url
        finally:
            server.terminate()
            server.wait(10)


def test_stdio_requests_are_tool_events_with_schema_arguments_and_output(
    stdio_run: Captured,
) -> None:
    store, run_id, _ = stdio_run
    tools = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert [e.name for e in tools] == [
        f"mcp:{SERVER}:initialize",
        f"mcp:{SERVER}:resources/read",
        f"mcp:{SERVER}:prompts/get",
        f"mcp:{SERVER}:tools/list",
        f"mcp:{SERVER}/order_status",
    ]
    init, resource, prompt, _, call = tools
    assert _result(store, init)["serverInfo"]["name"] == "orders desk"
    assert resource.args == {"uri": "orders://policy"}
    assert "refunded within 5 days" in str(_result(store, resource))
    assert prompt.args == {"name": "support_reply", "arguments": {"customer": "ACME"}}
    assert call.args == {"order_id": 7}
    assert call.tool_schema["name"] == "order_status"
    assert call.tool_schema["inputSchema"]["properties"]["order_id"]["type"] == "integer"  # type: ignore[index, call-overload]
    assert _result(store, call)["structuredContent"] == {
        "order_id": 7,
        "found": True,
        "item": "blue widget",
        "status": "cancelled",
    }
    assert call.error is None and call.duration > 0
    assert call.mcp is not None and call.mcp.server == SERVER and call.mcp.method == "tools/call"
    assert call.mcp.transport["kind"] == "stdio"
    assert call.mcp.transport["command"][1:] == ["-m", "examples.mcp_server"]  # type: ignore[index]
    assert call.mcp.transport["env"] == ["DATABASE_URL", "MCP_MARKER"]  # names, never values


def test_stdio_replayed_5_of_5_without_starting_the_server(
    stdio_run: Captured,
) -> None:
    store, run_id, marker = stdio_run
    report = replay(run_id, store=store, times=5)
    assert report.verdict.reproduced == 5 and report.verdict.total == 5, report.describe()
    assert report.exit_code == 1
    assert all(d is None for d in report.divergences), report.describe()
    assert _starts(marker) == 0  # the server's process never started
    assert _marks(marker, "call") == 0
    replayed = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)]
    assert replayed[-1].name == f"mcp:{SERVER}/order_status"
    assert (
        replayed[-1].output
        == [e for e in store.load_events(run_id) if isinstance(e, ToolCall)][-1].output
    )


def test_stdio_live_mcp_starts_the_server_against_the_restored_database(
    stdio_run: Captured,
) -> None:
    store, run_id, marker = stdio_run
    policies = PolicySet.from_pairs([("live", f"mcp:{SERVER}")])
    report = replay(run_id, store=store, times=2, policies=policies)
    assert report.verdict.reproduced == 2 and report.verdict.total == 2, report.describe()
    assert _starts(marker) == 2  # started once per replay
    assert _marks(marker, "call") == 2
    call = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)][-1]
    # Production now says "shipped": "cancelled" came from the restored database.
    assert _result(store, call)["structuredContent"]["status"] == "cancelled"
    marker.unlink()


def test_http_capture_keeps_mcp_traffic_out_of_http_events(
    http_run: Captured,
) -> None:
    store, run_id, _ = http_run
    events = store.load_events(run_id)
    assert not [e for e in events if isinstance(e, HTTPExchange) and "/mcp" in e.url]
    call = [e for e in events if isinstance(e, ToolCall)][-1]
    assert call.name == f"mcp:{SERVER}/order_status"
    assert call.mcp is not None and call.mcp.transport["kind"] == "http"
    assert _result(store, call)["structuredContent"]["status"] == "cancelled"


def test_http_replayed_5_of_5_without_reaching_the_url(
    http_run: Captured,
) -> None:
    store, run_id, marker = http_run
    starts = _starts(marker)
    report = replay(run_id, store=store, times=5)  # nothing listens at the recorded URL
    assert report.verdict.reproduced == 5 and report.verdict.total == 5, report.describe()
    assert report.exit_code == 1
    assert _starts(marker) == starts
    assert _marks(marker, "call") == 1  # the capture's


def test_http_live_mcp_reaches_the_server_over_the_restored_database(
    http_run: Captured, restored_http_server: str
) -> None:
    store, run_id, marker = http_run
    calls = _marks(marker, "call")
    policies = PolicySet.from_pairs([("live", f"mcp:{SERVER}")])
    report = replay(
        run_id, store=store, times=2, policies=policies, services={"db": restored_http_server}
    )
    assert report.verdict.reproduced == 2 and report.verdict.total == 2, report.describe()
    assert _marks(marker, "call") == calls + 2  # each replay's tool call reached the server
    call = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)][-1]
    assert call.name == f"mcp:{SERVER}/order_status"
    assert _result(store, call)["structuredContent"]["status"] == "cancelled"
    assert call.duration > 0
