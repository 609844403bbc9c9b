"""A support agent that tells a customer when the Tokyo desk closes, asking PyPI's
``mcp-server-time`` (started as ``mcp-server-time --local-timezone Asia/Tokyo``) for the time
there, through the ``mcp`` SDK's ``ClientSession``. The bug: the server's answer carries its
UTC offset, and the agent subtracts it from the naive ``datetime.now()``: ``TypeError: can't
subtract offset-naive and offset-aware datetimes``. ``main_fixed`` counts from the server's
time; ``main_crash`` crashes before it asks."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from examples._model import MODEL, scripted_model
from sandbox import capture

SYSTEM = "You tell customers when the support desk closes (18:00 Tokyo time)."
USER = "How long is the Tokyo desk still open?"
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    args = {"timezone": "Asia/Tokyo"}
    return {"tool_calls": [{"name": "get_current_time", "arguments": args}]}


async def _closes_in(variant: str) -> dict[str, Any]:
    params = StdioServerParameters(
        command=os.environ.get("TIME_MCP", TIME_SERVER),
        args=["--local-timezone", "Asia/Tokyo"],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = [
            {"type": "function", "function": {"name": t.name, "parameters": t.input_schema}}
            for t in listed.tools
        ]
        with scripted_model(script) as client:
            reply = client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
                tools=tools,  # type: ignore[arg-type]
                temperature=0,
            )
        (call,) = reply.choices[0].message.tool_calls or []
        if variant == "crash":
            raise RuntimeError("forced crash before the time was asked")
        found = await session.call_tool(call.function.name, json.loads(call.function.arguments))
    tokyo = datetime.fromisoformat(str((found.structured_content or {})["datetime"]))
    closes = tokyo.replace(hour=18, minute=0, second=0)
    if closes < tokyo:
        closes += timedelta(days=1)
    left = closes - (tokyo if variant == "fixed" else datetime.now())  # type: ignore[operator]
    answer = {"minutes_left": int(left.total_seconds() // 60)}
    capture.result(answer)
    return answer


def main() -> dict[str, Any]:
    return asyncio.run(_closes_in("as-ran"))


def main_fixed() -> dict[str, Any]:
    return asyncio.run(_closes_in("fixed"))


def main_crash() -> dict[str, Any]:
    return asyncio.run(_closes_in("crash"))


if __name__ == "__main__":
    main()
