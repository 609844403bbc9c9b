"""A Gemini agent (``examples/gemini_agent.py``: the real ``google-genai`` client, plain
``generate_content`` and streamed ``generate_content_stream``, against the scripted model
speaking Gemini's API) with a bug in one tool's output: captured with no change to the
agent, its model calls read as the other APIs' are, replayed with the model server stopped
(reproduced; with the fixed tool and the model live again: gone), forked with the model's
last answer overridden, exported to OpenTelemetry and imported back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import pytest

from cli.main import main
from examples import _refunds, gemini_agent
from examples._model import serve_model
from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.judging.semantics import request_of
from sandbox.replay.serving.policy import PolicySet
from sandbox.seam.apis import gemini
from sandbox.snapshot.events import FinalResult, HTTPExchange, LLMCall, ToolCall
from sandbox.snapshot.manifest import Entrypoint, ForkEdits, ForkOverride
from sandbox.snapshot.normalize import request_fingerprint
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[2]
TOLD_30_DAYS = capture.ResultPredicate(path="answer", op="contains", value="30 days")


class Captured(NamedTuple):
    store: DirectoryStore
    run_id: str
    fixed: str
    """The entry point of the agent with the fixed tool."""
    port: int
    """The port the (now stopped) model server listened on."""


@pytest.fixture(scope="module", params=["main", "streamed"])
def captured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Captured]:
    function = request.param
    url, stop = serve_model(_refunds.script)
    patch = pytest.MonkeyPatch()
    patch.setenv(gemini_agent.MODEL_URL_ENV, url)
    store = DirectoryStore(tmp_path_factory.mktemp(f"gemini-{function}"))
    target = f"examples.gemini_agent:{function}"
    try:
        with capture.run(
            f"gemini-{function}",
            store=store,
            seed=11,
            entrypoint=Entrypoint(kind="callable", target=target, cwd=str(ROOT)),
            packages=False,
        ) as rec:
            answer = getattr(gemini_agent, function)()
            assert "30 days" in answer
            rec.mark_failed("the customer was given the 2023 refund window", TOLD_30_DAYS)
    finally:
        stop()  # every replay runs with the model server down
    yield Captured(store, rec.run_id, f"{target}_fixed", int(urlsplit(url).port or 0))
    patch.undo()


def _calls(store: DirectoryStore, run_id: str) -> list[LLMCall]:
    return [e for e in store.load_events(run_id) if isinstance(e, LLMCall)]


def _tool_calls(call: LLMCall) -> list[tuple[Any, Any]]:
    assert isinstance(call.response, dict)
    return [(c["name"], c["arguments"]) for c in call.response["tool_calls"]]


def test_model_calls_are_llm_events_with_model_messages_and_function_calls(
    captured: Captured,
) -> None:
    """Each call is read as the model (from the URL), the contents it was sent (the
    question, each function's response once it ran), the function declarations and the
    function calls or text it answered with, fingerprinted as replay reads the call."""
    calls = _calls(captured.store, captured.run_id)
    assert [c.model for c in calls] == ["scripted-1"] * 3
    assert {(c.provider, c.provider_meta["api"]) for c in calls} == {("gcp.gemini", gemini.NAME)}
    assert [c.streamed for c in calls] == [captured.fixed.endswith(":streamed_fixed")] * 3
    for call in calls:
        assert call.error is None and call.tools and call.usage["total_tokens"] == 15
        assert call.fingerprint == request_fingerprint("llm", call.name, request_of(call))
        assert _refunds.SYSTEM in json.dumps(call.messages)
        assert _refunds.SYSTEM not in json.dumps(call.params)
        assert call.params["generationConfig"] == {"temperature": 0.0}
    first, second, last = calls
    assert _tool_calls(first) == [("order_status", {"order_id": 7})]
    assert _tool_calls(second) == [("refund_window", {"country": "DE"})]
    assert "functionResponse" in json.dumps(second.messages)
    assert "delivered" in json.dumps(second.messages)
    assert "30 days" in json.dumps(last.messages)
    assert isinstance(last.response, dict) and not _tool_calls(last)
    assert last.response["text"] == "Yes: you can return order 7 within 30 days."


def test_the_api_key_header_is_recorded_redacted(captured: Captured) -> None:
    events = captured.store.load_events(captured.run_id)
    assert gemini_agent.API_KEY not in json.dumps([e.model_dump(mode="json") for e in events])
    exchange = next(e for e in events if isinstance(e, HTTPExchange))
    assert "x-goog-api-key" in exchange.request_headers


def test_the_run_reproduces_with_the_model_server_stopped(captured: Captured) -> None:
    report = replay(captured.run_id, store=captured.store, times=2)
    assert report.verdict.reproduced == 2 and report.verdict.total == 2, report.describe()
    assert report.exit_code == 1
    served = _calls(captured.store, report.replays[0])
    assert [c.response for c in served] == [
        c.response for c in _calls(captured.store, captured.run_id)
    ]


def test_the_fixed_tool_with_the_model_recorded_is_inconclusive_never_gone(
    captured: Captured,
) -> None:
    """The fixed tool's output changes the model's next request: the recording has no
    answer for it and the model server is down, so the run cannot be judged."""
    report = replay(
        captured.run_id,
        store=captured.store,
        entrypoint=captured.fixed,
        policies=PolicySet.from_argv(["--live", "tool:refund_window"]),
    )
    (run,) = report.verdict.runs
    assert run.outcome == "inconclusive" and run.reason == "mismatch", report.describe()
    assert report.exit_code == 2


def test_the_fixed_tool_with_the_model_live_again_makes_the_failure_go(
    captured: Captured,
) -> None:
    _, stop = serve_model(_refunds.script, port=captured.port)
    try:
        report = replay(
            captured.run_id,
            store=captured.store,
            entrypoint=captured.fixed,
            policies=PolicySet.from_argv(
                ["--live", "tool:refund_window", "--live", f"http:127.0.0.1:{captured.port}"]
            ),
            miss="live",  # the fixed output changes the model's next request
        )
    finally:
        stop()
    assert report.verdict.gone == 1 and report.verdict.total == 1, report.describe()
    assert report.exit_code == 0
    window = [e for e in captured.store.load_events(report.replays[0]) if isinstance(e, ToolCall)]
    assert window[-1].output == "14 days"


def test_an_overridden_final_answer_is_what_the_agent_answers(captured: Captured) -> None:
    """A fork with the model's last answer overridden (plain or streamed, as Gemini sends
    it), the model server down: the agent answers with the override, the failure is gone."""
    last = _calls(captured.store, captured.run_id)[-1]
    answer = "You can return order 7 within 14 days."
    edits = ForkEdits(overrides=[ForkOverride(step=last.seq, value=answer)])
    report = replay(captured.run_id, store=captured.store, fork=edits)
    assert report.verdict.gone == 1 and report.verdict.total == 1, report.describe()
    events = captured.store.load_events(report.replays[0])
    assert [e.served for e in events if isinstance(e, LLMCall)][-1] == "override"
    (result,) = [e for e in events if isinstance(e, FinalResult)]
    assert result.value == {"answer": answer}


def test_an_exported_run_imports_back_and_replays_with_the_model_server_stopped(
    captured: Captured, tmp_path: Path
) -> None:
    store = ["--store", str(captured.store.root)]
    trace = tmp_path / "trace.json"
    assert main(["otel", "export", captured.run_id, "--file", str(trace), *store]) == 0
    spans = [
        {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
        for resource in json.loads(trace.read_text())["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    llm = [s for s in spans if s.get("openinference.span.kind") == "LLM"]
    assert [s["gen_ai.provider.name"] for s in llm] == ["gcp.gemini"] * 3
    asked = json.loads(llm[1]["gen_ai.input.messages"])
    assert [m["role"] for m in asked] == ["system", "user", "assistant", "tool"]
    assert asked[2]["parts"][0]["type"] == "tool_call"
    assert asked[2]["parts"][0]["name"] == "order_status"
    assert asked[3]["parts"][0]["type"] == "tool_call_response"
    said = json.loads(llm[2]["gen_ai.output.messages"])
    assert said[0]["parts"][0]["content"] == "Yes: you can return order 7 within 30 days."
    assert int(llm[0]["gen_ai.usage.input_tokens"]) == 10  # OTLP/JSON: ints as strings

    run_id = f"{captured.run_id}-otel"
    assert main(["otel", "import", str(trace), "--run-id", run_id, *store]) == 0
    imported, original = _calls(captured.store, run_id), _calls(captured.store, captured.run_id)
    assert [(c.model, c.messages, c.tools) for c in imported] == [
        (c.model, c.messages, c.tools) for c in original
    ]
    report = replay(run_id, store=captured.store)
    assert report.verdict.reproduced == 1 and report.verdict.total == 1, report.describe()
