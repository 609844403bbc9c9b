"""MCP servers on replay: which recorded server a transport reaches, and which policy serves
its requests.

A server is found by its transport (:func:`sandbox.capture.mcp.transport_key`: the command
with paths cut to their base names, or the URL with a loopback port dropped). Its requests,
recorded as ``tool`` events named ``mcp:SERVER/...``, follow the ``mcp:SERVER`` policy
(default ``recorded``), not the ``tool`` one: a recorded server has no process behind it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from sandbox.capture.mcp import server_of, transport_key
from sandbox.errors import ReplayMismatchError
from sandbox.snapshot.events import Event, ToolCall


class RecordedServers:
    """The MCP servers a recording talked to, by transport."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.by_key: dict[str, str] = {}
        for event in events:
            if isinstance(event, ToolCall) and event.mcp is not None and event.mcp.transport:
                self.by_key.setdefault(transport_key(event.mcp.transport), event.mcp.server)

    def find(self, transport: dict[str, JsonValue]) -> str:
        """The recorded server's name; :class:`ReplayMismatchError` names the recorded ones."""
        key = transport_key(transport)
        found = self.by_key.get(key)
        if found is None:
            known = ", ".join(f"{n} ({k})" for k, n in self.by_key.items()) or "none"
            raise ReplayMismatchError(
                f"the agent reached an MCP server the recording does not know: {key} "
                f"(recorded servers: {known})",
                kind="mcp",
                name=key,
                actual=transport,
                candidates=[{"transport": k, "server": n} for k, n in self.by_key.items()],
            )
        return found


def policy_target(kind: str, name: str) -> tuple[str, str]:
    """The policy kind and name a crossing is served by: ``mcp``/SERVER for MCP requests."""
    server = server_of(name) if kind == "tool" else None
    return ("mcp", server) if server is not None else (kind, name)
