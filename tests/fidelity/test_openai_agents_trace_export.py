"""The OpenAI Agents SDK's trace export during a capture and a replay of
``examples/openai_agents_agent.py``: the SDK's own batch processor and backend exporter,
posting to a local stand-in of the provider's tracing endpoint, flushed by the agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples import openai_agents_agent
from examples._model import serve_http
from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[2]
INGESTED: list[dict[str, Any]] = []
"""Every batch the stand-in tracing endpoint was sent."""
TOLD_30_DAYS = capture.ResultPredicate(path="answer", op="contains", value="30 days")


def traced_main() -> str:
    """The agent, then the SDK's ``flush_traces`` (an export of everything queued)."""
    from agents import flush_traces

    answer = openai_agents_agent.main()
    flush_traces()
    return answer


@pytest.fixture
def ingest() -> Iterator[str]:
    """The SDK exports to a local endpoint (its backend exporter, with a key) for the test."""
    from agents import set_trace_processors, set_tracing_disabled
    from agents.tracing import get_trace_provider
    from agents.tracing.processors import (
        BackendSpanExporter,
        BatchTraceProcessor,
        default_processor,
    )

    def handler(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        INGESTED.append(body)
        return 200, {}

    url, stop = serve_http(handler, "trace-ingest")
    endpoint = f"{url}/v1/traces/ingest"
    exporter = BackendSpanExporter(api_key="sk-local-trace-key", endpoint=endpoint)
    set_trace_processors([BatchTraceProcessor(exporter)])
    # tracing on, whatever an agent module imported earlier in this process set (an agent
    # of tests/fidelity/wild disables it at import)
    disabled = getattr(get_trace_provider(), "_disabled", False)
    set_tracing_disabled(False)
    INGESTED.clear()
    try:
        yield endpoint
    finally:
        set_tracing_disabled(bool(disabled))
        set_trace_processors([default_processor()])
        stop()


def test_capture_and_replay_export_no_trace_and_record_no_exchange_with_the_endpoint(
    ingest: str, tmp_path: Path
) -> None:
    traced_main()  # outside a capture the SDK does export, to the stand-in
    assert INGESTED, "the SDK exported no trace outside a capture"
    INGESTED.clear()

    store = DirectoryStore(tmp_path)
    settings = capture.run(
        "agents-trace-export",
        store=store,
        seed=3,
        entrypoint=Entrypoint(kind="callable", target=f"{__name__}:traced_main", cwd=str(ROOT)),
        packages=False,
    )
    with settings as rec:
        answer = traced_main()
        rec.mark_failed("the customer was given the 2023 refund window", TOLD_30_DAYS)
    assert "30 days" in answer
    from agents import flush_traces

    flush_traces()  # nothing of the captured run was left queued for later either
    assert INGESTED == []
    captured = store.load_events(rec.run_id)
    assert not [e for e in captured if isinstance(e, HTTPExchange) and "traces" in e.name]

    report = replay(rec.run_id, store=store)
    assert report.exit_code == 1 and report.verdict.reproduced == 1, report.describe()
    assert INGESTED == []
    replayed = store.load_events(report.replays[0])
    assert not [e for e in replayed if isinstance(e, HTTPExchange) and "traces" in e.name]
