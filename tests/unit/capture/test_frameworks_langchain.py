"""LangChain tools run by LangGraph's ``ToolNode``: what the event records as the call."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, ToolRuntime

from sandbox import capture
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.store import DirectoryStore


def graph(node: ToolNode) -> Any:
    """A graph of the one node (a ``ToolNode`` runs in a graph's context)."""
    built = StateGraph(MessagesState)
    built.add_node("tools", node)
    built.add_edge(START, "tools")
    built.add_edge("tools", END)
    return built.compile()


def test_arguments_langgraph_injects_are_not_recorded_as_the_calls(tmp_path: Path) -> None:
    """``ToolNode`` hands a tool its ``ToolRuntime`` and graph state along with the model's
    arguments (langchain-mcp-adapters' tools all take the runtime): the event's arguments
    are the model's only, not the graph's config, state and objects (which differ each run,
    so a replay would diverge at every tool call)."""

    @tool
    def due(
        book_id: int, runtime: ToolRuntime, state: Annotated[dict[str, Any], InjectedState]
    ) -> str:
        """The day a book is due back."""
        assert runtime is not None and state["messages"]
        return "2026-12-01"

    call = {"name": "due", "args": {"book_id": 12}, "id": "call_1", "type": "tool_call"}
    store = DirectoryStore(tmp_path)
    with capture.run("injected", store=store, packages=False) as rec:
        done = graph(ToolNode([due])).invoke({"messages": [AIMessage("", tool_calls=[call])]})
    assert done["messages"][-1].content == "2026-12-01"
    (event,) = [e for e in store.load_events(rec.run_id) if isinstance(e, ToolCall)]
    assert event.args == {"book_id": 12}
    assert set(event.tool_schema["parameters"]["properties"]) == {"book_id"}  # type: ignore[index, arg-type]
