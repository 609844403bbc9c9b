"""A pydantic-ai agent with two tools, written the way its docs write one: plain functions
handed to ``Agent(tools=...)`` and an OpenAI chat model (here the scripted one, through the
real ``openai`` client). Nothing in it knows about capture.

The bug is in one tool's output (see :mod:`examples._refunds`): the customer is told
``30 days`` (``answer`` contains ``30 days``). ``main_fixed`` uses the fixed tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent, Tool
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from examples import _refunds
from examples._model import MODEL, scripted_model
from sandbox import capture


def order_status(order_id: int) -> dict[str, Any]:
    """The status and destination country of an order."""
    return _refunds.order(order_id)


def refund_window(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return _refunds.window_2023(country)


def refund_window_fixed(country: str) -> str:
    """How long a customer in ``country`` has to return an order."""
    return _refunds.window_2024(country)


def _ask(window: Callable[[str], str]) -> str:
    with scripted_model(_refunds.script) as client:
        provider = OpenAIProvider(base_url=str(client.base_url), api_key=client.api_key)
        agent = Agent(
            OpenAIChatModel(MODEL, provider=provider),
            instructions=_refunds.SYSTEM,
            tools=[order_status, Tool(window, name="refund_window")],
        )
        return str(agent.run_sync(_refunds.USER).output)


def main() -> str:
    """The agent as it ran (the 2023 refund window)."""
    answer = _ask(refund_window)
    capture.result({"answer": answer})
    return answer


def main_fixed() -> str:
    """The agent with the fixed refund window."""
    answer = _ask(refund_window_fixed)
    capture.result({"answer": answer})
    return answer
