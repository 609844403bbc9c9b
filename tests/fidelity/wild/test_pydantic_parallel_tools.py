"""A pydantic-ai agent (``await agent.run``) whose model asks for two rates at once:
pydantic-ai runs the two sync tool calls side by side, each on one of anyio's worker
threads (which all bear one name), each posting to the carriers' HTTP API with
``requests``. The tools' events are named by the task that handed each to anyio and the
order it did so in, so the replay (model and carrier API stopped) tells the two apart and
matches them every time. Captured both ways (:mod:`tests.fidelity.wild.corpus`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fidelity.wild.corpus import STYLES
from tests.fidelity.wild.parcels import (
    assert_goes_once_fixed,
    booking_tasks,
    capture_booking,
    replay_five,
)

AGENT = "pydantic_parcels"


@pytest.mark.parametrize("style", STYLES)
def test_pydantic_ai_parallel_sync_tools_replay_without_divergence(
    tmp_path: Path, style: str
) -> None:
    """The booking code compares the prices as strings and books 12.40 over 9.90. The two
    tool calls' tasks, both named ``rate`` by pydantic-ai, are told apart by the order
    they were created in (``rate``, ``rate-2``), and each call's post is named by its
    task's submission to anyio (``rate/anyio#1``, ``rate-2/anyio#1``); with the model and
    the carrier API stopped, five replays reproduce the failure, make every recorded call
    and name the calls' and posts' tasks as the capture did; the fixed comparison makes
    it go. (Whether a replay diverges is not asserted: at the run's start pydantic-ai makes
    two UUIDv7 ids, whose random part is 4 bytes or 10 by whether both fall in one
    millisecond, and the replay's clock before its first recorded call stands at the
    run's start: about one test run in ten drew otherwise.)"""
    run, tasks = capture_booking(style, tmp_path, AGENT)
    assert tasks == ["rate", "rate-2", "rate-2/anyio#1", "rate/anyio#1"], tasks
    result = replay_five(run)
    for replayed in result.report["replays"]:
        assert booking_tasks(run.store.load_events(replayed)) == tasks, replayed
    assert_goes_once_fixed(run, tmp_path, AGENT)
