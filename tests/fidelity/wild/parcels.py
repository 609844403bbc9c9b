"""The parcel desk both parallel-tools trials share: a model that asks two carriers for a
rate at once, the carriers' API, the capture of an agent over them (which books the dearer
rate: it compares prices as strings), and its replays with both stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from examples._model import last_tool_results
from sandbox.snapshot.events import Event, HTTPExchange, ToolCall
from tests.fidelity import harness
from tests.fidelity.wild.corpus import assert_gone, captured, edit, model_env

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


def capture_booking(style: str, folder: Path, agent: str) -> tuple[harness.Captured, list[str]]:
    """``agent`` captured in ``style`` with the model and the carriers up: it failed booking
    12.40 over 9.90 after asking both carriers; the run, and the tasks its events name
    (:func:`booking_tasks`)."""
    with harness.model(parcels_model) as base, harness.service(carriers, "carriers") as url:
        run = captured(style, folder, agent, {**model_env(base), "CARRIER_URL": url})
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "booked colissimo at 12.40, 9.9 offered" in run.manifest.failure.reason
    tools = [e for e in run.events if isinstance(e, ToolCall) and e.name == "rate"]
    assert sorted(str(e.args["carrier"]) for e in tools) == sorted(PRICES), run.events
    return run, booking_tasks(run.events)


def booking_tasks(events: list[Event]) -> list[str]:
    """The tasks the two tool calls' events name, then those their two posts' name (each
    sorted)."""
    tools = [e for e in events if isinstance(e, ToolCall) and e.name == "rate"]
    posts = [e for e in events if isinstance(e, HTTPExchange) and e.url.endswith("/rate")]
    return sorted(e.task for e in tools) + sorted(e.task for e in posts)


def replay_five(run: harness.Captured) -> harness.Replayed:
    """Five replays (model and carriers stopped): each reproduces the failure and makes
    every recorded call."""
    result = harness.replay(run.store, run.run_id, times=5)
    harness.assert_reproduced_every_time(result, times=5)
    coverage = result.report["verdict"]["coverage"]
    assert coverage["made"] == coverage["recorded"], result.output
    return result


def assert_goes_once_fixed(run: harness.Captured, folder: Path, agent: str) -> None:
    """The fixed comparison (floats) makes the failure go."""
    edit(folder, agent, *FIX)
    assert_gone(harness.replay(run.store, run.run_id, times=1))
