"""A support agent whose tools come from an MCP server (``examples/mcp_server.py``).

The agent asks the scripted model (through the real ``openai`` client) what to do, hands it
the server's tools as listed by ``tools/list``, and calls them with ``tools/call``: nothing
in it knows about capture. The failure: order 7 was cancelled by a bad batch job, and the
agent tells the customer so (``answer`` contains ``cancelled``).

``main`` starts the server over stdio (``DATABASE_URL`` handed to it); ``main_http`` reaches
one over streamable HTTP at ``ORDERS_MCP_URL``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from examples._model import MODEL, last_tool_results, scripted_model
from sandbox import capture

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = "You answer customers about their orders. Look the order up before answering."
USER = "Where is my order 7?"


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    done = last_tool_results(messages)
    if done:
        order = json.loads(done[-1])
        return {"content": f"Order {order['order_id']} ({order['item']}) is {order['status']}."}
    return {"tool_calls": [{"name": "order_status", "arguments": {"order_id": 7}}]}


def server_params() -> StdioServerParameters:
    env = {"DATABASE_URL": os.environ["DATABASE_URL"]}
    if os.environ.get("MCP_MARKER"):
        env["MCP_MARKER"] = os.environ["MCP_MARKER"]
    return StdioServerParameters(
        command=sys.executable, args=["-m", "examples.mcp_server"], env=env, cwd=str(ROOT)
    )


async def converse(session: ClientSession) -> str:
    """Initialize, read the policy and prompt, list the tools and run the model's calls."""
    await session.initialize()
    await session.read_resource("orders://policy")
    await session.get_prompt("support_reply", {"customer": "ACME"})
    listed = await session.list_tools()
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description or "",
                "parameters": t.input_schema,
            },
        }
        for t in listed.tools
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
    ]
    with scripted_model(script) as client:
        for _ in range(4):
            reply = (
                client.chat.completions.create(
                    model=MODEL, messages=messages, tools=tools, temperature=0
                )
                .choices[0]
                .message
            )
            if not reply.tool_calls:
                return str(reply.content or "")
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                result = await session.call_tool(
                    call.function.name, json.loads(call.function.arguments)
                )
                content = json.dumps(result.structured_content)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return ""


async def _stdio() -> str:
    async with stdio_client(server_params()) as (read, write), ClientSession(read, write) as s:
        return await converse(s)


async def _http() -> str:
    url = os.environ["ORDERS_MCP_URL"]
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        return await converse(s)


def main() -> str:
    """The agent with its MCP server over stdio."""
    answer = asyncio.run(_stdio())
    capture.result({"answer": answer})
    return answer


def main_http() -> str:
    """The agent with its MCP server over streamable HTTP."""
    answer = asyncio.run(_http())
    capture.result({"answer": answer})
    return answer
