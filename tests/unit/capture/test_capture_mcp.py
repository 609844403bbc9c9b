"""MCP servers as policy targets and how a recorded server is found again (no server runs
here: tests/integration/test_mcp_replay.py runs real ones)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from sandbox.capture.mcp import (
    event_name,
    http_transport,
    server_of,
    server_slug,
    stdio_transport,
    transport_key,
)
from sandbox.errors import ReplayMismatchError, UnknownNameError
from sandbox.replay.serving.mcp import RecordedServers, policy_target
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.events import MCPInfo, ToolCall


def test_mcp_servers_are_recorded_by_default_and_live_by_rule() -> None:
    assert PolicySet().policy_for("mcp", "orders-desk").name == "recorded"
    rules = PolicySet.from_argv(["--live", "mcp:orders-*", "--recorded", "mcp:orders-old"])
    assert rules.policy_for("mcp", "orders-desk").name == "live"
    assert rules.policy_for("mcp", "orders-old").name == "recorded"
    assert rules.policy_for("tool", "charge").name == "live"  # tools keep their default
    with pytest.raises(UnknownNameError, match="mcp"):
        PolicySet.from_argv(["--live", "mpc:orders"])


def test_mcp_requests_follow_their_server_policy_not_the_tool_one() -> None:
    assert event_name("orders-desk", "tools/call", "order_status") == "mcp:orders-desk/order_status"
    assert event_name("orders-desk", "tools/list") == "mcp:orders-desk:tools/list"
    assert policy_target("tool", "mcp:orders-desk/order_status") == ("mcp", "orders-desk")
    assert policy_target("tool", "mcp:orders-desk:initialize") == ("mcp", "orders-desk")
    assert policy_target("tool", "charge") == ("tool", "charge")
    assert policy_target("http", "mcp:x/y") == ("http", "mcp:x/y")
    assert server_of("mcp:a.b_c-d/t") == "a.b_c-d"
    assert server_slug("orders desk: EU/1") == "orders-desk--EU-1"


def test_a_server_is_found_by_its_transport_across_machines() -> None:
    here = {"kind": "stdio", "command": ["/usr/bin/python3", "/home/a/srv/server.py", "-v"]}
    there = {"kind": "stdio", "command": ["/opt/py/python3", "/tmp/x/server.py", "-v"]}
    assert transport_key(here) == transport_key(there) == "stdio python server.py -v"
    url = http_transport("http://user:secret@127.0.0.1:8123/mcp")
    assert url == {"kind": "http", "url": "http://127.0.0.1:8123/mcp"}  # no credentials kept
    assert transport_key(url) == transport_key({"kind": "http", "url": "http://localhost:9/mcp"})
    assert transport_key({"kind": "http", "url": "https://mcp.example.com:8443/x"}) == (
        "http https://mcp.example.com:8443/x"
    )


def test_interpreters_match_by_what_they_are_and_scripts_by_their_place_in_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started as ``python server.py`` (a venv's ``python``) is the one the replay
    starts as ``python3 ./server.py``, or through a symlink to this interpreter; a script
    is known by its path in the project, an argument that is not a path as given."""
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "server.py").write_text("")
    alias = tmp_path / "interp"
    alias.symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)

    def key(command: str, *args: str, cwd: str | None = None) -> str:
        params = StdioServerParameters(command=command, args=list(args), cwd=cwd)
        return transport_key(stdio_transport(params))

    recorded = key(".venv/bin/python", "srv/server.py", "--local-timezone", "Asia/Tokyo")
    assert recorded == "stdio python srv/server.py --local-timezone Asia/Tokyo"
    assert key("python3", "./srv/server.py", "--local-timezone", "Asia/Tokyo") == recorded
    assert key(str(alias), f"{tmp_path}/srv/server.py", "--local-timezone", "Asia/Tokyo") == (
        recorded
    )
    assert key("python3", "server.py", "--local-timezone", "Asia/Tokyo", cwd="srv") == recorded
    assert key("python3", "srv/server.py", "--local-timezone", "Europe/Paris") != recorded
    assert key("mcp-server-time", "--local-timezone", "Asia/Tokyo") == (
        "stdio mcp-server-time --local-timezone Asia/Tokyo"
    )


def _event(server: str, transport: dict[str, object]) -> ToolCall:
    return ToolCall(
        seq=0,
        wall=1.0,
        mono=1.0,
        name=event_name(server, "initialize"),
        mcp=MCPInfo(server=server, method="initialize", transport=transport),  # type: ignore[arg-type]
    )


def test_an_unknown_server_is_a_mismatch_naming_the_recorded_ones() -> None:
    servers = RecordedServers(
        [_event("orders-desk", {"kind": "stdio", "command": ["python", "-m", "orders"]})]
    )
    assert servers.find({"kind": "stdio", "command": ["/x/python", "-m", "orders"]}) == (
        "orders-desk"
    )
    with pytest.raises(ReplayMismatchError, match=r"does not know: stdio python -m billing"):
        servers.find({"kind": "stdio", "command": ["python", "-m", "billing"]})
    with pytest.raises(ReplayMismatchError, match=r"orders-desk \(stdio python -m orders\)"):
        servers.find({"kind": "http", "url": "http://127.0.0.1:1/mcp"})
