"""Order desk: an OpenAI Agents SDK assistant checks the warehouse's MCP server (at
STOCK_MCP_URL: streamable HTTP, or SSE for a URL ending in ``/sse``) before it promises an
order; the order code then books it."""

import asyncio
import json
import os

from agents import Agent, Runner, set_tracing_disabled
from agents.mcp import MCPServerSse, MCPServerStreamableHttp
from pydantic import BaseModel

set_tracing_disabled(True)


class Promise(BaseModel):
    sku: str
    units: int
    ships_today: bool


async def promise(request: str) -> Promise:
    url = os.environ["STOCK_MCP_URL"]
    client = MCPServerSse if url.endswith("/sse") else MCPServerStreamableHttp
    async with client(params={"url": url}, name="warehouse") as warehouse:
        agent = Agent(
            name="orders",
            instructions="Check the stock before you promise that an order ships today.",
            model="scripted-1",
            mcp_servers=[warehouse],
            output_type=Promise,
        )
        result = await Runner.run(agent, request)
        level = await warehouse.call_tool("stock", {"sku": result.final_output.sku})
    return result.final_output, json.loads(level.content[0].text)


def book(promised: Promise, level: dict) -> None:
    free = level["on_hand"] - level["held"]
    if promised.ships_today and promised.units > free:
        raise ValueError(f"promised {promised.units} x {promised.sku} today, only {free} are free")
    print(f"booked {promised.units} x {promised.sku}")


def main() -> None:
    book(*asyncio.run(promise("Can 3 lamps ship today?")))


if __name__ == "__main__":
    main()
