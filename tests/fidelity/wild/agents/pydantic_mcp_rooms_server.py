"""The office's meeting rooms as an MCP server over stdio, from the SQLite file rooms.db."""

import sqlite3

from mcp.server.mcpserver import MCPServer

server = MCPServer("rooms")


@server.tool()
def room(name: str) -> dict:
    """A meeting room: how many people it seats."""
    with sqlite3.connect("rooms.db") as conn:
        (seats,) = conn.execute("SELECT seats FROM rooms WHERE name = ?", (name,)).fetchone()
    return {"room": name, "seats": seats}


if __name__ == "__main__":
    server.run("stdio")
