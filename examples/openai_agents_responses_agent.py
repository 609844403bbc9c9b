"""The OpenAI Agents SDK agent of :mod:`examples.openai_agents_agent` (the same
``@function_tool`` tools and refund scenario) on the SDK's default model: the agent names its
model (``Agent(model=...)``) and the SDK runs it on ``OpenAIResponsesModel``, which talks the
Responses API, here to the scripted model through the real ``openai`` client made the SDK's
default (``set_default_openai_client``). ``main`` runs it with ``Runner.run_sync``,
``streamed`` with ``Runner.run_streamed`` (the model's answers come as server-sent events).
Nothing in it knows about capture.

The bug is in one tool's output (see :mod:`examples._refunds`): the customer is told
``30 days`` (``answer`` contains ``30 days``). The ``*_fixed`` entry points use the fixed tool.
"""

from __future__ import annotations

import asyncio

from agents import Agent, Runner, Tool, set_default_openai_client
from openai import AsyncOpenAI

from examples import _refunds
from examples._model import MODEL, scripted_model
from examples.openai_agents_agent import order_status, refund_window, refund_window_fixed
from sandbox import capture


def _ask(tools: list[Tool], *, streamed: bool) -> str:
    with scripted_model(_refunds.script) as client:
        set_default_openai_client(
            AsyncOpenAI(base_url=str(client.base_url), api_key=client.api_key, max_retries=0),
            use_for_tracing=False,
        )
        agent = Agent(name="refunds", instructions=_refunds.SYSTEM, model=MODEL, tools=tools)
        if not streamed:
            return str(Runner.run_sync(agent, _refunds.USER).final_output)

        async def run() -> str:
            result = Runner.run_streamed(agent, _refunds.USER)
            async for _ in result.stream_events():
                pass
            return str(result.final_output)

        return asyncio.run(run())


def _answer(tools: list[Tool], *, streamed: bool) -> str:
    answer = _ask(tools, streamed=streamed)
    capture.result({"answer": answer})
    return answer


def main() -> str:
    """The agent as it ran (the 2023 refund window)."""
    return _answer([order_status, refund_window], streamed=False)


def main_fixed() -> str:
    """The agent with the fixed refund window."""
    return _answer([order_status, refund_window_fixed], streamed=False)


def streamed() -> str:
    """The agent as it ran, streamed."""
    return _answer([order_status, refund_window], streamed=True)


def streamed_fixed() -> str:
    """The agent with the fixed refund window, streamed."""
    return _answer([order_status, refund_window_fixed], streamed=True)
