"""A LangGraph ReAct agent with two LangChain tools, written the way the frameworks' docs
write one: ``@tool`` functions, ``ChatOpenAI`` (here pointed at the scripted model) and
``create_react_agent``. Nothing in it knows about capture.

The bug is in one tool's output: ``refund_window`` still answers with the 2023 policy, so
the customer is told ``30 days`` (``answer`` contains ``30 days``). ``main_fixed`` uses the
fixed tool (``14 days``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

from examples._model import MODEL, last_tool_results, scripted_model
from sandbox import capture

SYSTEM = "You help customers with returns. Look the order up, then its refund window."
USER = "Can I still return order 7?"


@tool
def order_status(order_id: int) -> dict[str, Any]:
    """The status and destination country of an order."""
    return {"order_id": order_id, "status": "delivered", "country": "DE"}


@tool
def refund_window(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return "30 days"  # the 2023 policy: the bug


@tool("refund_window")
def refund_window_fixed(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return "14 days"


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Look the order up, then its refund window, then answer with the window."""
    done = last_tool_results(messages)
    asked = sum(1 for m in messages if m.get("role") == "tool")
    if asked == 0:
        return {"tool_calls": [{"name": "order_status", "arguments": {"order_id": 7}}]}
    if asked == 1:
        return {"tool_calls": [{"name": "refund_window", "arguments": {"country": "DE"}}]}
    return {"content": f"Yes: you can return order 7 within {done[-1]}."}


async def _ask(tools: list[BaseTool]) -> str:
    with scripted_model(script) as client:
        model = ChatOpenAI(
            model=MODEL,
            base_url=str(client.base_url),
            api_key="sk-local-scripted-model-key",  # type: ignore[arg-type]
            temperature=0,
            max_retries=0,
        )
        agent = create_react_agent(model, tools, prompt=SYSTEM)
        state = await agent.ainvoke({"messages": [("user", USER)]})
    return str(state["messages"][-1].content)


def main() -> str:
    """The agent as it ran (the 2023 refund window)."""
    answer = asyncio.run(_ask([order_status, refund_window]))
    capture.result({"answer": answer})
    return answer


def main_fixed() -> str:
    """The agent with the fixed refund window."""
    answer = asyncio.run(_ask([order_status, refund_window_fixed]))
    capture.result({"answer": answer})
    return answer
