"""Capture cost of OpenAI Agents SDK function tools, each figure from two sides doing the
same work (:func:`bench.compare.compare`: one warm-up each, the sides alternating over the
rounds). ``python -m bench.agents_sdk [--quick]``

1. One tool call: N calls of a ``@function_tool``'s ``on_invoke_tool`` (the SDK's invoker,
   where the adapter hooks), inside one capture, recorded (each a ``tool`` event) against
   the same calls with the capture bypassed (the adapter passing through). The difference
   per call is the cost of recording one call.
2. A whole run: an ``Agent`` on the SDK's own ``ScriptedModel`` making N tool calls, one a
   turn, then answering. Captured: ``capture.run`` around the run (the tool events and
   whatever else the capture records of it: ids, clock reads). Baseline: ``capture.run``
   around nothing, then the same run uncaptured. Ratio captured / uncaptured.

The SDK's tracing is off on both sides (a capture queues nothing for the SDK's exporter).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from bench.compare import compare, ratios, record
from sandbox import capture
from sandbox.seam import boundary
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--quick"]


@function_tool
def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "delivered", "items": [1, 2, 3]}


def _tool_events(store: DirectoryStore) -> list[int]:
    """The number of tool events of each run in ``store``."""
    counts = []
    for manifest in store.list():
        events = store.load_events(manifest.run_id)
        counts.append(sum(isinstance(e, ToolCall) for e in events))
    return sorted(counts)


def bench_invoke(root: Path, calls: int, rounds: int) -> list[float]:
    """µs added per tool call by recording it, one value per round."""
    store = DirectoryStore(root / "invoke")

    async def invoke() -> None:
        for i in range(calls):
            arguments = f'{{"order_id": {i}}}'
            ctx = ToolContext(
                None, tool_name="lookup", tool_call_id=f"c{i}", tool_arguments=arguments
            )
            await lookup.on_invoke_tool(ctx, arguments)

    def recorded() -> None:
        asyncio.run(invoke())

    def passed_through() -> None:
        with boundary.bypassed():
            asyncio.run(invoke())

    with capture.run("agents-invoke", store=store, seed=1, packages=False):
        ours, base = compare(recorded, passed_through, rounds=rounds)
    assert _tool_events(store) == [(rounds + 1) * calls]  # the recorded side only
    return [(o - b) / calls * 1e6 for o, b in zip(ours, base, strict=True)]


def agent_run(calls: int) -> None:
    """One run of ``calls`` tool calls, one a turn, then an answer."""
    steps: list[Any] = [
        [function_call("lookup", {"order_id": i}, call_id=f"call_{i}")] for i in range(calls)
    ]
    model = ScriptedModel([*steps, [assistant_message("done")]])
    agent = Agent(name="bench", model=model, tools=[lookup])
    Runner.run_sync(agent, "look the orders up", max_turns=calls + 1)


def bench_run(root: Path, calls: int, rounds: int) -> list[float]:
    """Ratios captured / uncaptured of a whole run, one per round."""
    store = DirectoryStore(root / "runs")
    count = itertools.count()

    def captured() -> None:
        with capture.run(f"agents-{next(count)}", store=store, seed=1, packages=False):
            agent_run(calls)

    def uncaptured() -> None:
        with capture.run(f"agents-{next(count)}", store=store, seed=1, packages=False):
            pass
        agent_run(calls)

    ours, base = compare(captured, uncaptured, rounds=rounds)
    assert _tool_events(store) == [0] * (rounds + 1) + [calls] * (rounds + 1)
    return ratios(ours, base)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.agents_sdk")
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    args = parser.parse_args(argv)
    invokes, calls, rounds = (200, 10, 5) if args.quick else (1000, 50, 15)
    set_tracing_disabled(True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        record(
            f"agents sdk: recording one function-tool call ({invokes} calls)",
            bench_invoke(root, invokes, rounds),
            unit=" µs",
        )
        record(
            f"agents sdk: captured / uncaptured, {calls}-call run", bench_run(root, calls, rounds)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
