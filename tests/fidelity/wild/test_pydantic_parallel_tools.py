"""A pydantic-ai agent (``await agent.run``) whose model asks for two rates at once:
pydantic-ai runs the two sync tool calls side by side, each on one of anyio's worker
threads (which all bear one name), each posting to the carriers' HTTP API with
``requests``. The tools' events are named by the task that handed each to anyio and the
order it did so in, so the replay (model and carrier API stopped) tells the two apart and
matches them every time. Captured both ways (:mod:`tests.fidelity.wild.corpus`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.events import HTTPExchange, ToolCall
from tests.fidelity import harness
from tests.fidelity.wild.corpus import STYLES, assert_gone, captured, edit, model_env

AGENT = "pydantic_parcels"
PRICES = {"colissimo": "12.40", "dpd": "9.90"}
FIX = ('min(rates, key=lambda r: r["price"])', 'min(rates, key=lambda r: float(r["price"]))')


def parcels_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Asks both carriers at once, then answers."""
    if not last_tool_results(messages):
        calls = [{"name": "rate", "arguments": {"carrier": c, "kilos": 4}} for c in PRICES]
        return {"tool_calls": calls}
    return {"content": "Both carriers quoted."}


def carriers(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    carrier = body["carrier"]
    return 200, {"carrier": carrier, "price": PRICES[carrier], "currency": "EUR"}


@pytest.mark.parametrize("style", STYLES)
def test_pydantic_ai_parallel_sync_tools_replay_without_divergence(
    tmp_path: Path, style: str
) -> None:
    """The booking code compares the prices as strings and books 12.40 over 9.90. The two
    tool calls' tasks, both named ``rate`` by pydantic-ai, are told apart by the order
    they were created in (``rate``, ``rate-2``), and each call's post is named by its
    task's submission to anyio (``rate/anyio#1``, ``rate-2/anyio#1``); with the model and
    the carrier API stopped, five replays reproduce the failure, make every recorded call
    and do not diverge; the fixed comparison makes it go."""
    with harness.model(parcels_model) as base, harness.service(carriers, "carriers") as url:
        run = captured(style, tmp_path, AGENT, {**model_env(base), "CARRIER_URL": url})
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "booked colissimo at 12.40, 9.9 offered" in run.manifest.failure.reason
    tools = [e for e in run.events if isinstance(e, ToolCall) and e.name == "rate"]
    assert sorted(str(e.args["carrier"]) for e in tools) == sorted(PRICES), run.events
    assert sorted(e.task for e in tools) == ["rate", "rate-2"], [e.task for e in tools]
    posts = [e for e in run.events if isinstance(e, HTTPExchange) and e.url.endswith("/rate")]
    assert sorted(e.task for e in posts) == ["rate-2/anyio#1", "rate/anyio#1"], run.events

    result = harness.replay(run.store, run.run_id, times=5)
    harness.assert_reproduced_every_time(result, times=5)
    assert result.report["divergences"] == [None] * 5, result.output
    coverage = result.report["verdict"]["coverage"]
    assert coverage["made"] == coverage["recorded"], result.output

    edit(tmp_path, AGENT, *FIX)
    assert_gone(harness.replay(run.store, run.run_id, times=1))
