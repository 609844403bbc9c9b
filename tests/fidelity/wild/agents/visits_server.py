"""The front desk's MCP server: checks customers in, in the SQLite file at VISITS_DB."""

import os
import sqlite3
import uuid

from mcp.server.mcpserver import MCPServer

server = MCPServer("front desk")


@server.tool()
def check_in(customer: str) -> str:
    """Check a customer in; says whether they were here today already."""
    with sqlite3.connect(os.environ["VISITS_DB"]) as conn:
        (today,) = conn.execute(
            "SELECT count(*) FROM visits WHERE customer = ? AND date(at) = date('now')",
            (customer,),
        ).fetchone()
        conn.execute(
            "INSERT INTO visits (id, customer, at) VALUES (?, ?, datetime('now'))",
            (str(uuid.uuid4()), customer),
        )
    return f"welcome back, {customer}" if today else f"welcome, {customer}"


if __name__ == "__main__":
    server.run("stdio")
