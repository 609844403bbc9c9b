"""A pydantic-ai agent whose tools come from a real MCP server over stdio through
pydantic-ai's ``MCPToolset`` (on fastmcp's client, over the ``mcp`` SDK's ``stdio_client``):
the server (``agents/pydantic_mcp_rooms_server.py``, the ``mcp`` SDK's ``MCPServer``) reads
its rooms from a SQLite file. Captured both ways (:mod:`tests.fidelity.wild.corpus`:
``sandbox capture -- python pydantic_mcp_rooms.py``, and with ``@capture.run`` on its
``main``) and replayed with ``sandbox replay RUN --json`` fully recorded, the model stopped,
the room's row changed and the server unable to start."""

from __future__ import annotations

import re
import sqlite3
from importlib.metadata import version
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
    capture,
    captured,
    edit,
    model_env,
)

AGENT = "pydantic_mcp_rooms"
SERVER = "rooms"


def rooms_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Looks the room up, then books it for the team of 10, with the seats the server gave."""
    done = last_tool_results(messages)
    if not done:
        return {"tool_calls": [{"name": "room", "arguments": {"name": "Kyoto"}}]}
    found = re.search(r"seats\W+(\d+)", done[-1])
    assert found, done[-1]
    booking = {"room": "Kyoto", "people": 10, "seats": int(found.group(1))}
    return {"tool_calls": [{"name": "final_result", "arguments": booking}]}


def _rooms(folder: Path, seats: int) -> None:
    with sqlite3.connect(folder / "rooms.db") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS rooms (name TEXT PRIMARY KEY, seats INT)")
        conn.execute("INSERT OR REPLACE INTO rooms VALUES ('Kyoto', ?)", (seats,))
    conn.close()


@pytest.mark.parametrize("style", STYLES)
def test_pydantic_ai_mcp_toolset_over_stdio_replays_its_room_too_small(
    tmp_path: Path, style: str
) -> None:
    """Kyoto seats 6 since it was refitted; the assistant books it for 10 and the calendar
    refuses. The server's requests are recorded with its command; the SQLite file the server
    process opens is captured into the run. After the capture Kyoto seats 12 again and the
    server script fails as it starts: the replay starts no server (reproduced every time),
    the fixed script (it waitlists a room too small) makes it go, a crash is inconclusive."""
    _rooms(tmp_path, 6)
    with harness.model(rooms_model) as base:
        run = captured(style, tmp_path, AGENT, model_env(base))
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "room Kyoto seats 6, booked for 10 people" in run.manifest.failure.reason
    calls = [e for e in run.events if isinstance(e, ToolCall) and e.mcp is not None]
    (room,) = [e for e in calls if e.name == f"mcp:{SERVER}/room"]
    assert room.mcp is not None and room.mcp.transport["kind"] == "stdio"
    assert room.mcp.transport["match"] == ["python", "pydantic_mcp_rooms_server.py"]
    (touched,) = [t for t in run.manifest.touched if t.kind == "sqlite"]
    assert touched.service is not None and touched.endpoint.endswith("rooms.db")
    _rooms(tmp_path, 12)
    server = tmp_path / "pydantic_mcp_rooms_server.py"
    server.write_text('raise SystemExit("the rooms server must not start")\n' + server.read_text())

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id, times=2), times=2)

    edit(
        tmp_path,
        AGENT,
        "    if booking.people > booking.seats:\n",
        "    if booking.people > booking.seats:\n"
        '        print(f"waitlisted for a room of {booking.people}")\n'
        "        return\n"
        "    if booking.people > booking.seats:\n",
    )
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    signature = "def book(booking: Booking) -> None:\n"
    edit(tmp_path, AGENT, signature, signature + '    raise OSError("calendar down")\n')
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")


def test_an_in_process_mcp_server_is_named_at_capture_and_runs_again_on_replay(
    tmp_path: Path,
) -> None:
    """``MCPToolset(server)`` talks to the server object in this process over memory
    streams, which no transport the capture knows opened: one stderr line says its session
    is not captured, no MCP event is written, and the replay runs the server again in the
    agent's process, on the SQLite file as captured (Kyoto seats 12 by then): reproduced."""
    _rooms(tmp_path, 6)
    with harness.model(rooms_model) as base:
        run = capture(tmp_path, f"{AGENT}_inproc", model_env(base))
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "room Kyoto seats 6, booked for 10 people" in run.manifest.failure.reason
    said = [line for line in run.output.splitlines() if line.startswith("sandbox: mcp ")]
    assert said == [
        f"sandbox: mcp {version('mcp')} ClientSession over a transport other than "
        "stdio_client, streamable_http_client or sse_client (an in-process server, say) is "
        "not captured: its requests run again on replay"
    ]
    assert [e for e in run.events if isinstance(e, ToolCall) and e.mcp is not None] == []
    _rooms(tmp_path, 12)

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id, times=2), times=2)
