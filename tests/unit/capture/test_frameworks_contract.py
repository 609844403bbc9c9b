"""The contract every framework integration passes: a tool built the framework's way and
run the framework's way is captured as a ``tool`` event (name, schema, arguments, output or
error), served from the recording without running under ``--recorded tool:NAME``, and run
under ``--live tool:NAME``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox import capture
from sandbox.capture.frameworks import INTEGRATIONS
from sandbox.replay import replay
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

RAN: list[str] = []
"""The tool bodies that really ran."""


def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up.

    Args:
        order_id: the order's number
    """
    RAN.append("lookup")
    return {"order_id": order_id, "status": "delivered"}


def broken(order_id: int) -> str:
    """Always fails.

    Args:
        order_id: the order's number
    """
    RAN.append("broken")
    raise ValueError(f"no order {order_id}")


@dataclass(frozen=True)
class Harness:
    """How one framework builds a tool from a function and calls it."""

    build: Callable[[Callable[..., Any]], Any]
    call: Callable[[Any, dict[str, Any]], Any]


def _langchain() -> Harness:
    from langchain_core.tools import StructuredTool

    return Harness(StructuredTool.from_function, lambda tool, args: tool.invoke(args))


def _openai_agents() -> Harness:
    from agents import Agent, Runner, ToolCallOutputItem, UserError, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    def call(tool: Any, args: dict[str, Any]) -> Any:
        model = ScriptedModel(
            [[function_call(tool.name, args, call_id="call_1")], [assistant_message("done")]]
        )
        try:
            result = Runner.run_sync(Agent(name="contract", model=model, tools=[tool]), "go")
        except UserError as exc:  # "Error running tool NAME: ...", from the tool's exception
            raise exc.__cause__ from None  # type: ignore[misc]
        return next(i.output for i in result.new_items if isinstance(i, ToolCallOutputItem))

    # failure_error_function=None: a failing tool fails the run (the default hands the model
    # a message instead)
    return Harness(lambda fn: function_tool(fn, failure_error_function=None), call)


def _pydantic_ai() -> Harness:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def call(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1:  # the user's prompt only: call the tool
                return ModelResponse(parts=[ToolCallPart(fn.__name__, args)])
            return ModelResponse(parts=[TextPart("done")])

        result = Agent(FunctionModel(model), tools=[fn]).run_sync("go")
        parts = [p for m in result.all_messages() for p in m.parts]
        return next(p.content for p in parts if isinstance(p, ToolReturnPart))

    return Harness(lambda fn: fn, call)


def _smolagents() -> Harness:
    from smolagents import tool

    # as a ToolCallingAgent runs a tool the model called (execute_tool_call)
    return Harness(tool, lambda found, args: found(**args, sanitize_inputs_outputs=True))


HARNESSES: dict[str, Callable[[], Harness]] = {
    "langchain": _langchain,
    "openai_agents": _openai_agents,
    "pydantic_ai": _pydantic_ai,
    "smolagents": _smolagents,
}


def agent(framework: str) -> dict[str, Any]:
    """The entrypoint captured and replayed: one good call, one failing call."""
    harness = HARNESSES[framework]()
    found = harness.call(harness.build(lookup), {"order_id": 7})
    try:
        harness.call(harness.build(broken), {"order_id": 8})
    except ValueError as exc:
        error = str(exc)
    result = {"found": found, "error": error}
    capture.result(result)
    return result


def agent_langchain() -> dict[str, Any]:
    return agent("langchain")


def agent_openai_agents() -> dict[str, Any]:
    return agent("openai_agents")


def agent_pydantic_ai() -> dict[str, Any]:
    return agent("pydantic_ai")


def agent_smolagents() -> dict[str, Any]:
    return agent("smolagents")


def test_every_integration_has_a_contract_harness() -> None:
    assert set(HARNESSES) == set(INTEGRATIONS)


@pytest.mark.parametrize("framework", sorted(INTEGRATIONS))
def test_framework_tools_are_captured_and_served_by_policy(framework: str, tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    target = f"{__name__}:agent_{framework}"
    settings = capture.run(
        f"contract-{framework}",
        store=store,
        seed=1,
        entrypoint=Entrypoint(kind="callable", target=target, cwd=str(tmp_path)),
        packages=False,
    )
    RAN.clear()
    with settings as rec:
        captured = agent(framework)
        rec.mark_failed("order 8 is missing", capture.ResultPredicate(path="error", op="ne"))
    assert RAN == ["lookup", "broken"]
    good, bad = [e for e in store.load_events(rec.run_id) if isinstance(e, ToolCall)]
    assert good.name == "lookup" and good.args == {"order_id": 7}
    assert good.tool_schema["name"] == "lookup"
    assert "order_id" in str(good.tool_schema["parameters"])
    assert good.output == {"order_id": 7, "status": "delivered"} and good.error is None
    assert bad.name == "broken" and bad.args == {"order_id": 8}
    assert bad.error is not None and bad.error.type == "ValueError"
    assert bad.error.message == "no order 8"

    RAN.clear()
    recorded = replay(rec.run_id, store=store, policies=PolicySet.from_argv(["--recorded", "tool"]))
    assert recorded.exit_code == 1, recorded.describe()  # the same result, from the recording
    assert RAN == []
    replayed = store.load_events(recorded.replays[0])
    assert [e.name for e in replayed if isinstance(e, ToolCall)] == ["lookup", "broken"]

    RAN.clear()
    live = replay(rec.run_id, store=store, policies=PolicySet.from_argv(["--live", "tool:*"]))
    assert live.exit_code == 1, live.describe()
    assert RAN == ["lookup", "broken"]
    assert captured["found"] == {"order_id": 7, "status": "delivered"}
