"""The refund desk's MCP server (the ``mcp`` SDK's ``MCPServer``, over stdio): refunds are
rows in the SQLite file at ``REFUNDS_DB``, which this process opens as it starts. The payment
provider is slow to confirm the first refund: the row is committed, and the answer comes only
once the refund is asked again (the client had given up on it)."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("refund desk")
db = sqlite3.connect(os.environ["REFUNDS_DB"], isolation_level=None)  # opened as it starts
db.execute("CREATE TABLE IF NOT EXISTS refunds (order_id int, cents int)")
_retried = anyio.Event()
_refunds_asked = 0


@server.tool()
async def refund(order_id: int, cents: int) -> dict[str, Any]:
    """Refund ``cents`` on an order."""
    global _refunds_asked
    db.execute("INSERT INTO refunds VALUES (?, ?)", (order_id, cents))  # committed
    _refunds_asked += 1
    if _refunds_asked == 1 and os.environ.get("REFUND_CONFIRM_SECONDS"):
        # The provider confirms the first refund late: after the client has given up on it
        # and asked again (or after REFUND_CONFIRM_SECONDS).
        with anyio.move_on_after(float(os.environ["REFUND_CONFIRM_SECONDS"])):
            await _retried.wait()
    else:
        _retried.set()
    return {"order_id": order_id, "refunded": cents}


@server.tool()
async def refunds(order_id: int) -> dict[str, Any]:
    """The refunds made on an order."""
    rows = db.execute("SELECT cents FROM refunds WHERE order_id = ?", (order_id,)).fetchall()
    return {"order_id": order_id, "refunds": [r[0] for r in rows]}


if __name__ == "__main__":
    server.run()
