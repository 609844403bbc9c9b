"""A LangGraph ReAct agent (``ainvoke``) whose model asks for two rates at once: LangGraph
runs the two sync tools side by side on asyncio's thread pool, each posting to the
carriers' HTTP API with ``requests``. Which of the pool's idle workers runs which tool
varies from run to run; the tools' events are named by the task that handed each to the
pool and the order it did so in, so the replay (model and carrier API stopped) matches
them every time. Captured both ways (:mod:`tests.fidelity.wild.corpus`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fidelity.wild.corpus import STYLES
from tests.fidelity.wild.parcels import assert_goes_once_fixed, capture_booking, replay_five

AGENT = "langgraph_parcels"


@pytest.mark.parametrize("style", STYLES)
def test_langgraph_parallel_sync_tools_replay_without_divergence(
    tmp_path: Path, style: str
) -> None:
    """The booking code compares the prices as strings and books 12.40 over 9.90. Both
    tools' calls and posts are named by the task that handed each to asyncio's pool (two
    tasks, each its first submission); with the model and the carrier API stopped, five
    replays reproduce the failure, make every recorded call and do not diverge; the fixed
    comparison makes it go."""
    run, tasks = capture_booking(style, tmp_path, AGENT)
    tools, posts = tasks[:2], tasks[2:]
    assert all(t.endswith("/asyncio#1") for t in tools) and len(set(tools)) == 2, tasks
    assert posts == tools, tasks
    result = replay_five(run)
    assert result.report["divergences"] == [None] * 5, result.output
    assert_goes_once_fixed(run, tmp_path, AGENT)
