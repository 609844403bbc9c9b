"""Forks of the duplicate order (examples/orders.py): recorded up to a step, live from it
against the agent's scripted model, with the model and its parameters changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from examples import _model
from sandbox.replay import ReplayReport, replay
from sandbox.snapshot.events import Event, LLMCall
from sandbox.snapshot.manifest import ForkEdits
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DirectoryStore, str]]:
    from examples.capture_demo import capture_orders

    store = DirectoryStore(tmp_path_factory.mktemp("fork-orders-store"))
    yield store, capture_orders(store)


def _model_calls(events: list[Event]) -> list[LLMCall]:
    return [e for e in events if isinstance(e, LLMCall)]


def _second_model_call(store: DirectoryStore, run_id: str) -> int:
    """The step of the confirmation (the model's second call), its HTTP exchange's seq."""
    calls = _model_calls(store.load_events(run_id))
    assert len(calls) == 2
    exchange = next(
        e for e in store.load_events(run_id) if e.kind == "http" and e.span == calls[1].parent_span
    )
    return exchange.seq


def _fork_at_the_confirmation(
    captured: tuple[DirectoryStore, str], **edits: Any
) -> tuple[ForkEdits, ReplayReport]:
    """A fork live from the model's second call, with what the scripted model receives
    from then on in :data:`examples._model.RECEIVED`."""
    store, run_id = captured
    fork = ForkEdits(until=_second_model_call(store, run_id), **edits)
    _model.RECEIVED.clear()
    return fork, replay(run_id, store=store, fork=fork)


def test_until_serves_the_recording_before_the_step_and_runs_live_after(
    captured: tuple[DirectoryStore, str],
) -> None:
    store, run_id = captured
    edits, report = _fork_at_the_confirmation(captured)
    assert report.fork == edits
    # The fork is after the duplicate insert: the failure is still there.
    assert report.verdict.reproduced == 1, report.describe()
    fork = store.load_manifest(report.replays[0])
    assert fork.replay_of == run_id and fork.fork == edits
    events = store.load_events(report.replays[0])
    served = [(e.kind, e.name, e.served) for e in events if e.served is not None]
    # The first model call came from the recording, the second from the live scripted model.
    assert [e.served for e in _model_calls(events)] == ["recorded", "live"], served
    assert _model.RECEIVED and len(_model.RECEIVED) == 1
    assert _model.RECEIVED[0]["messages"][-1]["role"] == "tool"
    # Before the fork: tools live against the restored database, the gateway's charges from
    # the recording, the first attempt failed as recorded (injected), the second live.
    tools = [(name, how) for kind, name, how in served if kind == "tool"]
    assert tools == [("insert_order", "live"), ("insert_order", "live"), ("place_order", "live")]
    charges = [how for kind, name, how in served if kind == "http" and name.endswith("/charge")]
    assert charges == ["recorded", "recorded"], served
    retries = [how for kind, _, how in served if kind == "retry"]
    assert retries == ["recorded", "live"], served
    https = [(e.seq, e.served) for e in events if e.kind == "http" and "chat" in e.name]
    assert [how for _, how in https] == ["recorded", "live"]


def test_model_and_params_reach_the_live_model_request(
    captured: tuple[DirectoryStore, str],
) -> None:
    store, _ = captured
    _, report = _fork_at_the_confirmation(
        captured, model="scripted-2", params={"temperature": 0.25, "seed": 3}
    )
    assert report.verdict.total == 1 and report.mismatch is None, report.describe()
    assert len(_model.RECEIVED) == 1
    sent = _model.RECEIVED[0]
    assert sent["model"] == "scripted-2"
    assert sent["temperature"] == 0.25 and sent["seed"] == 3
    live = _model_calls(store.load_events(report.replays[0]))[-1]
    assert live.served == "live" and live.model == "scripted-2"
    assert live.params.get("temperature") == 0.25
    # The recorded call before the fork went to nobody: it kept the recorded model.
    first = _model_calls(store.load_events(report.replays[0]))[0]
    assert first.served == "recorded" and first.model == _model.MODEL
