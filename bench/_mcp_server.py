"""The MCP server ``bench.mcp`` calls (stdio): one small tool, no I/O of its own."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def lookup(order_id: int, region: str = "eu") -> dict[str, Any]:
    """An order, made up."""
    return {"id": order_id, "region": region, "items": [1, 2, 3]}


if __name__ == "__main__":
    server.run()
