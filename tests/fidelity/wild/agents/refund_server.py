"""The refund desk's MCP server (the ``mcp`` SDK's ``MCPServer``, over stdio): refunds are
rows in the SQLite file at ``REFUNDS_DB``, written by this process. The payment provider is
slow to confirm the first refund: the row is committed, then the answer comes late."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("refund desk")
_answered = 0


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["REFUNDS_DB"])
    conn.execute("CREATE TABLE IF NOT EXISTS refunds (order_id int, cents int)")
    return conn


@server.tool()
def refund(order_id: int, cents: int) -> dict[str, Any]:
    """Refund ``cents`` on an order."""
    global _answered
    with _db() as conn:
        conn.execute("INSERT INTO refunds VALUES (?, ?)", (order_id, cents))
    _answered += 1
    if _answered == 1:
        time.sleep(float(os.environ.get("REFUND_CONFIRM_SECONDS", "0")))
    return {"order_id": order_id, "refunded": cents}


@server.tool()
def refunds(order_id: int) -> dict[str, Any]:
    """The refunds made on an order."""
    with _db() as conn:
        rows = conn.execute("SELECT cents FROM refunds WHERE order_id = ?", (order_id,)).fetchall()
    return {"order_id": order_id, "refunds": [r[0] for r in rows]}


if __name__ == "__main__":
    server.run()
