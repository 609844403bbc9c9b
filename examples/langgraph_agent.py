"""A LangGraph ReAct agent with two LangChain tools, written the way the frameworks' docs
write one: ``@tool`` functions, ``ChatOpenAI`` (here pointed at the scripted model) and
``create_react_agent``. Nothing in it knows about capture.

The bug is in one tool's output (see :mod:`examples._refunds`): the customer is told
``30 days`` (``answer`` contains ``30 days``). ``main_fixed`` uses the fixed tool.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

from examples import _refunds
from examples._model import MODEL, scripted_model
from sandbox import capture


@tool
def order_status(order_id: int) -> dict[str, Any]:
    """The status and destination country of an order."""
    return _refunds.order(order_id)


@tool
def refund_window(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return _refunds.window_2023(country)


@tool("refund_window")
def refund_window_fixed(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return _refunds.window_2024(country)


async def _ask(tools: list[BaseTool]) -> str:
    with scripted_model(_refunds.script) as client:
        model = ChatOpenAI(
            model=MODEL,
            base_url=str(client.base_url),
            api_key="sk-local-scripted-model-key",  # type: ignore[arg-type]
            temperature=0,
            max_retries=0,
        )
        agent = create_react_agent(model, tools, prompt=_refunds.SYSTEM)
        state = await agent.ainvoke({"messages": [("user", _refunds.USER)]})
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
