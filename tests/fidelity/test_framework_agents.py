"""Agents written with a framework (``examples/langgraph_agent.py``: LangGraph with LangChain
tools and ``ChatOpenAI``; ``examples/pydantic_ai_agent.py``: pydantic-ai with an OpenAI chat
model; ``examples/openai_agents_agent.py``: the OpenAI Agents SDK with
``OpenAIChatCompletionsModel``), each with two tools and a bug in one tool's output: captured
with no change to the agent, replayed with the buggy tool recorded or live."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.policy import PolicySet
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ["langgraph_agent", "openai_agents_agent", "pydantic_ai_agent"]
TOLD_30_DAYS = capture.ResultPredicate(path="answer", op="contains", value="30 days")

Captured = tuple[DirectoryStore, str, str]
"""The store, the captured run, the agent's module."""


@pytest.fixture(scope="module", params=AGENTS)
def captured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Captured:
    import importlib

    module = f"examples.{request.param}"
    agent = importlib.import_module(module)
    store = DirectoryStore(tmp_path_factory.mktemp(request.param))
    settings = capture.run(
        request.param,
        store=store,
        seed=11,
        entrypoint=Entrypoint(kind="callable", target=f"{module}:main", cwd=str(ROOT)),
        packages=False,
    )
    with settings as rec:
        answer = agent.main()
        assert "30 days" in answer
        rec.mark_failed("the customer was given the 2023 refund window", TOLD_30_DAYS)
    return store, rec.run_id, module


def test_tool_calls_are_tool_events_with_schema_arguments_and_output(captured: Captured) -> None:
    store, run_id, _ = captured
    events = store.load_events(run_id)
    tools = [e for e in events if isinstance(e, ToolCall)]
    assert [e.name for e in tools] == ["order_status", "refund_window"]
    status, window = tools
    assert status.args == {"order_id": 7}
    assert status.tool_schema["name"] == "order_status"
    assert "order_id" in str(status.tool_schema["parameters"])
    assert "delivered" in str(status.output) and "DE" in str(status.output)
    assert window.args == {"country": "DE"}
    assert window.tool_schema["description"] == (
        "How long a customer in ``country`` has to return an order."
    )
    assert window.output == "30 days" and window.error is None
    assert [e.kind for e in events].count("llm") == 3  # the model calls, through httpx


def test_recorded_buggy_tool_reproduces_under_the_fixed_agent(captured: Captured) -> None:
    store, run_id, module = captured
    report = replay(
        run_id,
        store=store,
        times=2,
        entrypoint=f"{module}:main_fixed",
        policies=PolicySet.from_argv(["--recorded", "tool:refund_window"]),
    )
    assert report.verdict.reproduced == 2 and report.verdict.total == 2, report.describe()
    assert report.exit_code == 1
    window = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)][-1]
    assert window.output == "30 days"  # served from the recording: the fixed code never ran


def test_live_fixed_tool_makes_the_failure_go(captured: Captured) -> None:
    store, run_id, module = captured
    report = replay(
        run_id,
        store=store,
        times=2,
        entrypoint=f"{module}:main_fixed",
        policies=PolicySet.from_argv(["--live", "tool:refund_window"]),
        miss="live",  # the fixed output changes the model's next request
    )
    assert report.verdict.reproduced == 0 and report.verdict.total == 2, report.describe()
    assert report.exit_code == 0
    window = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)][-1]
    assert window.output == "14 days"
