"""An OpenAI Agents SDK agent with two tools, written the way the SDK's docs write one:
``@function_tool`` functions, an ``Agent`` on ``OpenAIChatCompletionsModel`` (here the
scripted model, through the real ``openai`` client) and ``Runner.run_sync``. Nothing in it
knows about capture.

The bug is in one tool's output (see :mod:`examples._refunds`): the customer is told
``30 days`` (``answer`` contains ``30 days``). ``main_fixed`` uses the fixed tool.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, Tool, function_tool
from openai import AsyncOpenAI

from examples import _refunds
from examples._model import MODEL, scripted_model
from sandbox import capture


@function_tool
def order_status(order_id: int) -> dict[str, Any]:
    """The status and destination country of an order."""
    return _refunds.order(order_id)


@function_tool
def refund_window(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return _refunds.window_2023(country)


@function_tool(name_override="refund_window")
def refund_window_fixed(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return _refunds.window_2024(country)


def _ask(tools: list[Tool]) -> str:
    with scripted_model(_refunds.script) as client:
        model = OpenAIChatCompletionsModel(
            MODEL,
            AsyncOpenAI(base_url=str(client.base_url), api_key=client.api_key, max_retries=0),
        )
        agent = Agent(name="refunds", instructions=_refunds.SYSTEM, model=model, tools=tools)
        return str(Runner.run_sync(agent, _refunds.USER).final_output)


def main() -> str:
    """The agent as it ran (the 2023 refund window)."""
    answer = _ask([order_status, refund_window])
    capture.result({"answer": answer})
    return answer


def main_fixed() -> str:
    """The agent with the fixed refund window."""
    answer = _ask([order_status, refund_window_fixed])
    capture.result({"answer": answer})
    return answer
