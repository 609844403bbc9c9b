"""The warehouse's MCP server over HTTP: stock levels in the SQLite file at STOCK_DB, served
on 127.0.0.1 at the port given as its first argument, over the transport given as its second
(``streamable-http``, at ``/mcp``, or ``sse``, at ``/sse``)."""

import os
import sqlite3
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("warehouse")


@server.tool()
def stock(sku: str) -> dict:
    """Units of a product in the warehouse, and how many of them are held for open orders."""
    with sqlite3.connect(os.environ["STOCK_DB"]) as conn:
        on_hand, held = conn.execute(
            "SELECT on_hand, held FROM stock WHERE sku = ?", (sku,)
        ).fetchone()
    return {"sku": sku, "on_hand": on_hand, "held": held}


if __name__ == "__main__":
    server.run(sys.argv[2], host="127.0.0.1", port=int(sys.argv[1]))
