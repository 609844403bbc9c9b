"""Agents written with a framework (``examples/langgraph_agent.py``: LangGraph with LangChain
tools and ``ChatOpenAI``; ``examples/pydantic_ai_agent.py``: pydantic-ai with an OpenAI chat
model; ``examples/openai_agents_agent.py``: the OpenAI Agents SDK with
``OpenAIChatCompletionsModel``; ``examples/openai_agents_responses_agent.py``: the same agent
on the SDK's default ``OpenAIResponsesModel`` (the Responses API), run and streamed), each
with two tools and a bug in one tool's output: captured with no change to the agent,
replayed with the buggy tool recorded or live, forked with the model's last answer overridden."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from examples import _refunds
from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.events import FinalResult, LLMCall, ToolCall
from sandbox.snapshot.manifest import Entrypoint, ForkEdits, ForkOverride
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[2]
AGENTS = [
    "langgraph_agent:main",
    "openai_agents_agent:main",
    "openai_agents_responses_agent:main",
    "openai_agents_responses_agent:streamed",
    "pydantic_ai_agent:main",
]
"""``module:function`` of each agent as it ran; ``function_fixed`` runs it with the fixed tool."""
TOLD_30_DAYS = capture.ResultPredicate(path="answer", op="contains", value="30 days")

Captured = tuple[DirectoryStore, str, str]
"""The store, the captured run, the entry point of the agent with the fixed tool."""


@pytest.fixture(scope="module", params=AGENTS)
def captured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Captured:
    import importlib

    name, function = request.param.split(":")
    module = f"examples.{name}"
    run = getattr(importlib.import_module(module), function)
    store = DirectoryStore(tmp_path_factory.mktemp(name))
    settings = capture.run(
        name,
        store=store,
        seed=11,
        entrypoint=Entrypoint(kind="callable", target=f"{module}:{function}", cwd=str(ROOT)),
        packages=False,
    )
    with settings as rec:
        answer = run()
        assert "30 days" in answer
        rec.mark_failed("the customer was given the 2023 refund window", TOLD_30_DAYS)
    return store, rec.run_id, f"{module}:{function}_fixed"


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


def test_model_calls_are_llm_events_with_model_messages_and_tool_calls(
    captured: Captured,
) -> None:
    """Each model call, whichever API the framework speaks and whether it streamed, is read
    as the model, the conversation it was sent (the question, each tool's output once it
    ran) and the tool calls or text it answered with."""
    store, run_id, fixed = captured
    calls = [e for e in store.load_events(run_id) if isinstance(e, LLMCall)]
    assert [c.model for c in calls] == ["scripted-1"] * 3
    assert [c.streamed for c in calls] == [fixed.endswith(":streamed_fixed")] * 3
    assert all(c.error is None and c.tools for c in calls)
    # The system prompt is a message (for the Responses API, its instructions), not a parameter.
    assert all(_refunds.SYSTEM in json.dumps(c.messages) for c in calls)
    assert all(_refunds.SYSTEM not in json.dumps(c.params) for c in calls)
    first, second, last = calls
    assert any(m.get("content") == "Can I still return order 7?" for m in _dicts(first.messages))
    assert [(t["name"], json.loads(str(t["arguments"]))) for t in _calls(first)] == [
        ("order_status", {"order_id": 7})
    ]
    assert [(t["name"], json.loads(str(t["arguments"]))) for t in _calls(second)] == [
        ("refund_window", {"country": "DE"})
    ]
    assert "delivered" in json.dumps(second.messages)
    assert "30 days" in json.dumps(last.messages)
    assert isinstance(last.response, dict) and not _calls(last)
    assert last.response.get("text") == "Yes: you can return order 7 within 30 days."


def _dicts(messages: list[Any]) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict)]


def _calls(call: LLMCall) -> list[dict[str, Any]]:
    assert isinstance(call.response, dict)
    calls = call.response["tool_calls"]
    assert isinstance(calls, list)
    return [c for c in calls if isinstance(c, dict)]


def test_recorded_buggy_tool_reproduces_under_the_fixed_agent(captured: Captured) -> None:
    store, run_id, fixed = captured
    report = replay(
        run_id,
        store=store,
        times=2,
        entrypoint=fixed,
        policies=PolicySet.from_argv(["--recorded", "tool:refund_window"]),
    )
    assert report.verdict.reproduced == 2 and report.verdict.total == 2, report.describe()
    assert report.exit_code == 1
    window = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)][-1]
    assert window.output == "30 days"  # served from the recording: the fixed code never ran


def test_live_fixed_tool_makes_the_failure_go(captured: Captured) -> None:
    store, run_id, fixed = captured
    report = replay(
        run_id,
        store=store,
        times=2,
        entrypoint=fixed,
        policies=PolicySet.from_argv(["--live", "tool:refund_window"]),
        miss="live",  # the fixed output changes the model's next request
    )
    assert report.verdict.reproduced == 0 and report.verdict.total == 2, report.describe()
    assert report.exit_code == 0
    window = [e for e in store.load_events(report.replays[0]) if isinstance(e, ToolCall)][-1]
    assert window.output == "14 days"


def test_a_model_request_the_recording_cannot_answer_is_inconclusive_never_gone(
    captured: Captured,
) -> None:
    """The fixed tool live with the model recorded and no live fallback: the model's next
    request carries the new output, the recording has no answer for it, so the run cannot be
    judged (a mismatch, said with the model call), whatever the framework makes of the
    refused call."""
    store, run_id, fixed = captured
    report = replay(
        run_id,
        store=store,
        entrypoint=fixed,
        policies=PolicySet.from_argv(["--live", "tool:refund_window"]),
    )
    (run,) = report.verdict.runs
    assert run.outcome == "inconclusive", report.describe()
    assert run.reason == "mismatch", report.describe()
    assert "scripted-1" in run.detail
    assert report.exit_code == 2


def test_an_overridden_final_answer_is_what_the_agent_answers(captured: Captured) -> None:
    """A fork with the model's last answer overridden (plain or streamed, in the API the
    framework speaks): the agent answers with the override, and the failure is gone."""
    store, run_id, _ = captured
    last = [e for e in store.load_events(run_id) if isinstance(e, LLMCall)][-1]
    answer = "You can return order 7 within 14 days."
    edits = ForkEdits(overrides=[ForkOverride(step=last.seq, value=answer)])
    report = replay(run_id, store=store, fork=edits)
    assert report.verdict.gone == 1 and report.verdict.total == 1, report.describe()
    events = store.load_events(report.replays[0])
    assert [e.served for e in events if isinstance(e, LLMCall)][-1] == "override"
    (result,) = [e for e in events if isinstance(e, FinalResult)]
    assert result.value == {"answer": answer}
