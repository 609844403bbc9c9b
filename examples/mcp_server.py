"""An MCP server (the official SDK's ``MCPServer``) whose tool reads the ``orders`` table of
the Postgres at ``DATABASE_URL``; a resource and a prompt for good measure.

Run it over stdio (``python -m examples.mcp_server``) or streamable HTTP (``python -m
examples.mcp_server http PORT``). When ``MCP_MARKER`` names a file, the server appends
``start PID`` to it as it starts and ``call ORDER`` for each tool call: tests check with it
whether a replay started or reached the server.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import psycopg
from mcp.server.mcpserver import MCPServer

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, item text NOT NULL, status text NOT NULL)
"""

server = MCPServer("orders desk", instructions="Order lookups for the support agent.")


@server.tool()
def order_status(order_id: int) -> dict[str, Any]:
    """The item and status of one order."""
    _mark(f"call {order_id}")
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        row = conn.execute("SELECT item, status FROM orders WHERE id = %s", (order_id,)).fetchone()
    if row is None:
        return {"order_id": order_id, "found": False}
    return {"order_id": order_id, "found": True, "item": row[0], "status": row[1]}


@server.resource("orders://policy")
def refund_policy() -> str:
    """The refund policy the agent quotes."""
    return "Cancelled orders are refunded within 5 days."


@server.prompt()
def support_reply(customer: str) -> str:
    """The instructions for a reply to one customer."""
    return f"Answer {customer} in one sentence, naming the order's status."


def _mark(line: str) -> None:
    marker = os.environ.get("MCP_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(f"{line}\n")


if __name__ == "__main__":
    _mark(f"start {os.getpid()}")
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
