"""A refund agent written with the OpenAI Agents SDK, its database tools from PyPI's
``mcp-server-sqlite`` (in a venv of its own, as ``uvx`` runs it) through the SDK's own MCP
client, ``agents.mcp.MCPServerStdio``. The model reads the order's lines with the server's
``read_query``; the agent refunds what it read. The bug: it adds up every line, the
cancelled one too (``refund_cents`` is 5700, the customer paid 4200). ``main_fixed`` refunds
the delivered lines only; ``main_crash`` crashes once the model has answered."""

from __future__ import annotations

import ast
import asyncio
import os
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

from examples._model import MODEL, last_tool_results, scripted_model
from sandbox import capture

set_tracing_disabled(True)
SYSTEM = "You refund orders. Read the order's lines before you answer."
USER = "Please refund my order 7."
QUERY = "SELECT item, cents, status FROM lines WHERE order_id = 7 ORDER BY item"


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    if last_tool_results(messages):
        return {"content": "Order 7 is refunded."}
    return {"tool_calls": [{"name": "read_query", "arguments": {"query": QUERY}}]}


async def _refund(variant: str) -> dict[str, Any]:
    params = {"command": os.environ["SQLITE_MCP"], "args": ["--db-path", os.environ["SHOP_DB"]]}
    with scripted_model(script) as client:
        model = OpenAIChatCompletionsModel(
            MODEL,
            AsyncOpenAI(base_url=str(client.base_url), api_key=client.api_key, max_retries=0),
        )
        async with MCPServerStdio(params=params, name="shop-db") as server:  # type: ignore[arg-type]
            agent = Agent(name="refunds", instructions=SYSTEM, model=model, mcp_servers=[server])
            result = await Runner.run(agent, USER)
    if variant == "crash":
        raise RuntimeError("forced crash once the model has answered")
    (read,) = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    text = str(read.output)
    lines = ast.literal_eval(text[text.index("[") : text.rindex("]") + 1])
    if variant == "fixed":
        lines = [line for line in lines if line["status"] == "delivered"]
    refund = {"order_id": 7, "refund_cents": sum(line["cents"] for line in lines)}
    capture.result({"answer": str(result.final_output), **refund})
    return refund


def main() -> dict[str, Any]:
    return asyncio.run(_refund("as-ran"))


def main_fixed() -> dict[str, Any]:
    return asyncio.run(_refund("fixed"))


def main_crash() -> dict[str, Any]:
    return asyncio.run(_refund("crash"))


if __name__ == "__main__":
    main()
