"""A refund agent on the refund desk's MCP server (``refund_server.py``, started with the
interpreter the agent runs on, ``sys.executable``), through the ``mcp`` SDK's
``ClientSession``. The model asks for the refund; the agent sends it, and retries when the
server does not answer in time (``except MCPError``). The bug: the refund had committed
before the timeout, so the retry refunds order 7 twice (``refund_requests`` is 2).
``main_fixed`` checks the refunds before it retries; ``main_crash`` crashes after the
first attempt."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from examples._model import MODEL, scripted_model
from sandbox import capture

HERE = Path(__file__).resolve().parent
SYSTEM = "You process refunds. Refund what the customer is owed."
USER = "Order 7 arrived broken, please refund the 42.00."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "refund",
            "description": "Refund cents on an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "integer"}, "cents": {"type": "integer"}},
            },
        },
    }
]


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "refund", "arguments": {"order_id": 7, "cents": 4200}}]}


def server_params() -> StdioServerParameters:
    env = {k: os.environ[k] for k in ("REFUNDS_DB", "REFUND_CONFIRM_SECONDS") if k in os.environ}
    return StdioServerParameters(
        command=sys.executable,
        args=[str(HERE / "refund_server.py")],
        env=env,
        cwd=str(HERE),
    )


async def _refund(variant: str) -> dict[str, Any]:
    with scripted_model(script) as client:
        reply = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
            tools=TOOLS,
            temperature=0,
        )
    (call,) = reply.choices[0].message.tool_calls or []
    arguments = {"order_id": 7, "cents": 4200}
    requests = 0
    async with stdio_client(server_params()) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        listed: dict[str, Any] | None = None
        for _attempt in range(3):
            requests += 1
            try:
                await s.call_tool(call.function.name, arguments, read_timeout_seconds=2.0)
                break
            except MCPError:
                if variant == "crash":
                    raise RuntimeError("forced crash after the first attempt") from None
                if variant == "fixed":  # the refund may have committed: look before retrying
                    found = await s.call_tool("refunds", {"order_id": 7})
                    listed = found.structured_content
                    if listed and listed["refunds"]:
                        break
        if listed is None:
            found = await s.call_tool("refunds", {"order_id": 7})
            listed = found.structured_content
    assert listed is not None
    result = {"order_id": 7, "refund_requests": requests, "refunds": listed["refunds"]}
    capture.result(result)
    return result


def main() -> dict[str, Any]:
    return asyncio.run(_refund("as-ran"))


def main_fixed() -> dict[str, Any]:
    return asyncio.run(_refund("fixed"))


def main_crash() -> dict[str, Any]:
    return asyncio.run(_refund("crash"))


def capture_into(store: str) -> None:
    """Capture :func:`main` into ``store`` as a callable run, marked failed; print its id."""
    from sandbox.snapshot.manifest import Entrypoint
    from sandbox.snapshot.store import DirectoryStore

    module = "tests.fidelity.wild.agents.refund_agent"  # not __main__ when run with -m
    target = Entrypoint(kind="callable", target=f"{module}:main", cwd=os.getcwd())
    settings = capture.run(
        "refund-timeout", store=DirectoryStore(store), seed=5, entrypoint=target, packages=False
    )
    with settings as rec:
        if main()["refund_requests"] > 1:
            twice = capture.ResultPredicate(path="refund_requests", op="gt", value=1)
            rec.mark_failed("order 7 was refunded twice", twice)
    print(rec.run_id)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "capture":
        capture_into(sys.argv[2])
    else:
        main()
