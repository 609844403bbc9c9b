"""What the OpenAI Agents SDK adapter adds to the framework contract: a tool error under the
SDK's default failure policy (the model is handed a message, the run goes on), a streamed
run, two tool calls in one turn (the SDK runs them concurrently), an agent used as a tool
(not a tool event itself; the tools it runs are), and a ``FunctionTool`` built by hand. The
agents' model is the SDK's own ``ScriptedModel``."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

RAN: list[str] = []
"""The tool bodies that really ran."""
SDK_MESSAGE = "An error occurred while running the tool. Please try again."


def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    RAN.append("lookup")
    return {"order_id": order_id, "status": "delivered"}


def missing(order_id: int) -> str:
    """Always fails."""
    RAN.append("missing")
    raise ValueError(f"no order {order_id}")


def _script(name: str, args: dict[str, Any], answer: str) -> Any:
    """The SDK's scripted model: call ``name`` with ``args``, then answer."""
    from agents.testing import ScriptedModel, assistant_message, function_call

    call = function_call(name, args, call_id=f"call_{name}")
    return ScriptedModel([[call], [assistant_message(answer)]])


def _tool_output(result: Any) -> Any:
    from agents import ToolCallOutputItem

    return next(i.output for i in result.new_items if isinstance(i, ToolCallOutputItem))


def agent_default_policy() -> dict[str, Any]:
    """A failing tool under the default failure policy: the model reads the SDK's message."""
    from agents import Agent, Runner, function_tool

    model = _script("missing", {"order_id": 8}, "sorry")
    result = Runner.run_sync(Agent(name="desk", model=model, tools=[function_tool(missing)]), "go")
    seen = {"seen": _tool_output(result)}
    capture.result(seen)
    return seen


def agent_streamed() -> dict[str, Any]:
    """One tool call in a streamed run."""
    from agents import Agent, Runner, function_tool

    async def run() -> Any:
        model = _script("lookup", {"order_id": 7}, "delivered")
        result = Runner.run_streamed(
            Agent(name="desk", model=model, tools=[function_tool(lookup)]), "go"
        )
        async for _ in result.stream_events():
            pass
        return result

    seen = {"seen": _tool_output(asyncio.run(run()))}
    capture.result(seen)
    return seen


def agent_nested() -> dict[str, Any]:
    """An agent that asks another agent (as a tool), which looks the order up."""
    from agents import Agent, Runner, function_tool

    inner = Agent(
        name="inner",
        model=_script("lookup", {"order_id": 7}, "delivered"),
        tools=[function_tool(lookup)],
    )
    ask = inner.as_tool(tool_name="ask_inner", tool_description="Ask the inner agent.")
    outer = Agent(
        name="outer", model=_script("ask_inner", {"input": "order 7?"}, "done"), tools=[ask]
    )
    seen = {"seen": _tool_output(Runner.run_sync(outer, "go"))}
    capture.result(seen)
    return seen


def agent_parallel() -> dict[str, Any]:
    """Two tool calls in one model turn."""
    from agents import Agent, Runner, ToolCallOutputItem, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    calls = [function_call("lookup", {"order_id": i}, call_id=f"call_{i}") for i in (1, 2)]
    model = ScriptedModel([calls, [assistant_message("done")]])
    result = Runner.run_sync(Agent(name="desk", model=model, tools=[function_tool(lookup)]), "go")
    seen = {"seen": [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]}
    capture.result(seen)
    return seen


async def lookup_json(ctx: Any, arguments: str) -> str:
    """A hand-built tool's ``on_invoke_tool``: JSON in, JSON out."""
    RAN.append("lookup_json")
    order_id = json.loads(arguments)["order_id"]
    return json.dumps({"order_id": order_id, "status": "delivered"})


LOOKUP_PARAMETERS = {
    "type": "object",
    "properties": {"order_id": {"type": "integer"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def agent_hand_built() -> dict[str, Any]:
    """One call of a ``FunctionTool`` built by hand."""
    from agents import Agent, FunctionTool, Runner

    tool = FunctionTool(
        name="lookup_json",
        description="Look an order up.",
        params_json_schema=LOOKUP_PARAMETERS,
        on_invoke_tool=lookup_json,
    )
    model = _script("lookup_json", {"order_id": 7}, "delivered")
    seen = {
        "seen": _tool_output(Runner.run_sync(Agent(name="desk", model=model, tools=[tool]), "go"))
    }
    capture.result(seen)
    return seen


def _capture(
    store: DirectoryStore, name: str, tmp_path: Path, failed: capture.ResultPredicate
) -> str:
    """Capture this module's ``name`` as a callable entrypoint, failed when ``failed``."""
    settings = capture.run(
        name,
        store=store,
        seed=1,
        entrypoint=Entrypoint(kind="callable", target=f"{__name__}:{name}", cwd=str(tmp_path)),
        packages=False,
    )
    with settings as rec:
        globals()[name]()
        rec.mark_failed("the failure", failed)
    return rec.run_id


def test_a_handled_tool_error_is_recorded_as_the_error_and_replays_as_the_sdk_message(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path)
    told = capture.ResultPredicate(path="seen", op="eq", value=SDK_MESSAGE)
    RAN.clear()
    run_id = _capture(store, "agent_default_policy", tmp_path, told)
    assert RAN == ["missing"]
    (event,) = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert event.error is not None and event.error.type == "ValueError"
    assert event.error.message == "no order 8" and event.output is None

    RAN.clear()
    policies = PolicySet.from_argv(["--recorded", "tool:missing"])
    report = replay(run_id, store=store, policies=policies)
    assert report.exit_code == 1, report.describe()  # the model read the same message
    assert RAN == []


def test_a_streamed_run_s_tools_are_captured_and_served_from_the_recording(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    delivered = capture.ResultPredicate(path="seen.status", op="eq", value="delivered")
    RAN.clear()
    run_id = _capture(store, "agent_streamed", tmp_path, delivered)
    assert RAN == ["lookup"]
    (event,) = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert event.name == "lookup" and event.args == {"order_id": 7}
    assert event.output == {"order_id": 7, "status": "delivered"}

    RAN.clear()
    report = replay(run_id, store=store, policies=PolicySet.from_argv(["--recorded", "tool"]))
    assert report.exit_code == 1, report.describe()
    assert RAN == []


def test_an_agent_used_as_a_tool_is_not_a_tool_event_but_its_tools_are(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    done = capture.ResultPredicate(path="seen", op="eq", value="delivered")
    RAN.clear()
    run_id = _capture(store, "agent_nested", tmp_path, done)
    assert RAN == ["lookup"]
    tools = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert [e.name for e in tools] == ["lookup"]


def test_a_hand_built_function_tool_is_captured_and_served_by_policy(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    delivered = capture.ResultPredicate(path="seen", op="contains", value="delivered")
    RAN.clear()
    run_id = _capture(store, "agent_hand_built", tmp_path, delivered)
    assert RAN == ["lookup_json"]
    (event,) = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert event.name == "lookup_json" and event.args == {"order_id": 7}
    assert event.tool_schema["description"] == "Look an order up."
    assert event.tool_schema["parameters"] == LOOKUP_PARAMETERS
    assert event.output == '{"order_id": 7, "status": "delivered"}'

    RAN.clear()
    recorded = PolicySet.from_argv(["--recorded", "tool:lookup_json"])
    assert replay(run_id, store=store, policies=recorded).exit_code == 1
    assert RAN == []
    live = PolicySet.from_argv(["--live", "tool:lookup_json"])
    assert replay(run_id, store=store, policies=live).exit_code == 1
    assert RAN == ["lookup_json"]


def test_two_tool_calls_in_one_turn_are_captured_in_their_own_tasks_and_replay(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path)
    both = capture.ResultPredicate(path="seen", op="ne", value=None)
    RAN.clear()
    run_id = _capture(store, "agent_parallel", tmp_path, both)
    assert RAN == ["lookup", "lookup"]
    tools = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert sorted(str(e.args["order_id"]) for e in tools) == ["1", "2"]
    assert len({e.task for e in tools}) == 2

    for argv, ran in ((["--recorded", "tool"], []), (["--live", "tool:*"], ["lookup"] * 6)):
        RAN.clear()
        report = replay(run_id, store=store, times=3, policies=PolicySet.from_argv(argv))
        assert report.verdict.reproduced == 3 and report.exit_code == 1, report.describe()
        assert ran == RAN


def test_an_sdk_without_the_hooks_is_said_and_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A release of the SDK that renamed the invoker: the adapter patches nothing and logs
    one warning naming the SDK's version (its tools would run uncaptured)."""
    import agents.tool

    from sandbox.capture.frameworks import openai_agents

    monkeypatch.delattr(agents.tool, "_FailureHandlingFunctionToolInvoker")
    before = agents.tool._invoke_function_tool_with_metadata
    with caplog.at_level(logging.WARNING, logger=openai_agents.__name__):
        undo = openai_agents._apply()
    undo()
    assert agents.tool._invoke_function_tool_with_metadata is before
    (record,) = caplog.records
    version = importlib.metadata.version("openai-agents")
    assert f"openai-agents {version}" in record.getMessage()
    assert "not captured" in record.getMessage()
