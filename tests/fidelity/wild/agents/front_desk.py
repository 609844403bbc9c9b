"""The front desk: checks a customer in through the desk's MCP server, then greets them. A
returning visitor gets no welcome gift; ada's gift went missing."""

import asyncio
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

DESK = StdioServerParameters(
    command=sys.executable, args=["visits_server.py"], env={"VISITS_DB": "visits.db"}
)


async def main() -> None:
    async with stdio_client(DESK) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("check_in", {"customer": "ada"})
    greeting = result.content[0].text
    if greeting.startswith("welcome back"):
        raise RuntimeError(f"ada got no welcome gift: the desk said {greeting!r}")
    print(greeting, "- here is your gift")


if __name__ == "__main__":
    asyncio.run(main())
