"""``sandbox otel import``: an OTLP/JSON trace becomes a run that replays the agent with every
model call served from the trace, while the model server is down."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ENTRYPOINT, Captured
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from sandbox.errors import OTelImportError
from sandbox.otel.importer import pick_trace, read_spans, snapshot_from_spans
from sandbox.snapshot.events import HTTPExchange, LLMCall, ToolCall


def _replay_json(captured: Captured, run_id: str, *extra: str, capsys: Any) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["replay", run_id, "--store", str(captured.store.root), "--json", *extra])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    report["exit_code"] = code
    return report


def _model_calls(captured: Captured, run_id: str) -> list[LLMCall]:
    return [e for e in captured.store.load(run_id).events if isinstance(e, LLMCall)]


def test_import_of_an_exported_run_replays_with_the_model_server_stopped(
    captured: Captured, tmp_path: Path, capsys: Any
) -> None:
    store = ["--store", str(captured.store.root)]
    trace = tmp_path / "trace.json"
    assert main(["otel", "export", captured.run_id, "--file", str(trace), *store]) == 0
    assert main(["otel", "import", str(trace), "--run-id", "kettle-otel", *store]) == 0

    imported = captured.store.load("kettle-otel")
    original = captured.store.load(captured.run_id)
    assert imported.manifest.services == []
    assert imported.manifest.entrypoint is not None
    assert imported.manifest.entrypoint.target == ENTRYPOINT
    assert imported.manifest.failure == original.manifest.failure
    assert [(e.kind, e.name) for e in imported.events if e.kind in {"llm", "tool"}] == [
        (e.kind, e.name) for e in original.events if e.kind in {"llm", "tool"}
    ]
    for got, want in zip(
        _model_calls(captured, "kettle-otel"), _model_calls(captured, captured.run_id), strict=True
    ):
        assert (got.model, got.messages, got.params, got.tools, got.response) == (
            want.model,
            want.messages,
            want.params,
            want.tools,
            want.response,
        )
    exchanges = [e for e in imported.events if isinstance(e, HTTPExchange)]
    assert [e.url for e in exchanges] == [f"{captured.model_url}chat/completions"] * 2

    capsys.readouterr()
    assert main(["show", "kettle-otel", *store]) == 0
    assert "state       none: imported from opentelemetry" in capsys.readouterr().out

    # The model server of the capture is down: a call that reached for it would fail.
    report = _replay_json(captured, "kettle-otel", capsys=capsys)
    assert report["exit_code"] == 1
    assert report["verdict"]["reproduced"] == 1
    assert report["mismatch"] is None
    (replay_id,) = report["replays"]
    served = _model_calls(captured, replay_id)
    assert [c.response for c in served] == [
        c.response for c in _model_calls(captured, "kettle-otel")
    ]
    tool = next(e for e in captured.store.load(replay_id).events if isinstance(e, ToolCall))
    assert tool.output == {"sku": "K-7", "qty": 0}


def test_a_reproduced_replay_of_an_imported_trace_reports_no_divergence(
    captured: Captured, tmp_path: Path, capsys: Any
) -> None:
    """A trace records no HTTP headers, clock reads or random draws: the replay's own (its
    client's headers) are not a divergence from the imported run, and it seeds the
    generators without a crossing the imported run lacks (it records no seed of them)."""
    store = ["--store", str(captured.store.root)]
    trace = tmp_path / "trace.json"
    assert main(["otel", "export", captured.run_id, "--file", str(trace), *store]) == 0
    assert main(["otel", "import", str(trace), "--run-id", "kettle-otel", *store]) == 0
    report = _replay_json(captured, "kettle-otel", capsys=capsys)
    assert report["exit_code"] == 1
    assert report["divergences"] == [None]
    (replay_id,) = report["replays"]
    kinds = {e.kind for e in captured.store.load(replay_id).events}
    assert "random" not in kinds  # seeded quietly: the imported run holds no seed step
    assert main(["replay", "kettle-otel", *store]) == 1
    out = capsys.readouterr().out
    assert "failure reproduced" in out and "first divergence" not in out


def test_import_reads_openinference_attributes_when_the_genai_ones_are_absent(
    captured: Captured, tmp_path: Path, capsys: Any
) -> None:
    """A trace with only the OpenInference attributes (what Phoenix's own instrumentations
    write) gives the same model requests, so the replay matches them exactly."""
    store = ["--store", str(captured.store.root)]
    trace = tmp_path / "trace.json"
    assert main(["otel", "export", captured.run_id, "--file", str(trace), *store]) == 0
    body = json.loads(trace.read_text())
    for resource in body["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [
                    a for a in span["attributes"] if not a["key"].startswith("gen_ai.")
                ]
    trace.write_text(json.dumps(body))
    assert main(["otel", "import", str(trace), "--run-id", "kettle-oi", *store]) == 0
    for got, want in zip(
        _model_calls(captured, "kettle-oi"), _model_calls(captured, captured.run_id), strict=True
    ):
        assert (got.messages, got.params, got.tools) == (want.messages, want.params, want.tools)
        assert isinstance(got.response, dict) and isinstance(want.response, dict)
        # OpenInference's output messages carry no finish reason: only the answer itself.
        assert got.response["stop_reason"] is None
        assert {**got.response, "stop_reason": want.response["stop_reason"]} == want.response
    report = _replay_json(captured, "kettle-oi", capsys=capsys)
    assert (report["exit_code"], report["verdict"]["reproduced"], report["mismatch"]) == (
        1,
        1,
        None,
    )


def test_import_of_a_trace_from_the_openai_v2_instrumentation_replays_the_agent(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace of the agent run under the OpenTelemetry GenAI instrumentation of the
    ``openai`` client (no sandbox capture): it records messages, model and parameters but not
    the tool definitions, so the replay matches model calls by position."""
    import otel_agent
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from examples._model import scripted_model
    from sandbox.otel.export import otlp_json
    from sandbox.snapshot.store import DirectoryStore

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with scripted_model(otel_agent.script) as client:
            monkeypatch.setenv(otel_agent.MODEL_URL_ENV, str(client.base_url))
            with provider.get_tracer("shop").start_as_current_span("kettle agent"):
                answer = otel_agent.main()["answer"]
    finally:
        instrumentor.uninstrument()
    assert "is in stock" in answer
    spans = memory.get_finished_spans()
    assert sorted(s.name for s in spans) == ["chat scripted-1", "chat scripted-1", "kettle agent"]
    trace_file = tmp_path / "instrumented.json"
    trace_file.write_text(json.dumps(otlp_json(spans)))

    store = DirectoryStore(tmp_path / "store")
    predicate = json.dumps(
        {"kind": "result", "path": "answer", "op": "contains", "value": "in stock"}
    )
    args = ["--store", str(store.root)]
    code = main(
        [
            "otel",
            "import",
            str(trace_file),
            "--run-id",
            "kettle-v2",
            "--entrypoint",
            ENTRYPOINT,
            "--predicate",
            predicate,
            *args,
        ]
    )
    assert code == 0
    imported = [e for e in store.load("kettle-v2").events if isinstance(e, LLMCall)]
    assert [c.messages[-1] for c in imported] == [
        {"role": "user", "content": otel_agent.USER},
        {"role": "tool", "tool_call_id": "call_0_0", "content": '{"sku": "K-7", "qty": 0}'},
    ]
    assert imported[0].response == {
        "text": None,
        "tool_calls": [{"id": "call_0_0", "name": "check_stock", "arguments": '{"sku": "K-7"}'}],
        "stop_reason": "tool_calls",
    }
    assert imported[0].params == {"temperature": 0}

    captured = Captured(store, "kettle-v2", "")  # the server above is stopped
    report = _replay_json(captured, "kettle-v2", "--miss", "position", capsys=capsys)
    assert report["exit_code"] == 1
    assert report["verdict"]["reproduced"] == 1
    (replay_id,) = report["replays"]
    served = _model_calls(captured, replay_id)
    assert [c.response for c in served] == [c.response for c in imported]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json at all", "not OTLP/JSON"),
        (b'{"spans": []}', "expected an object with 'resourceSpans'"),
        (b'{"resourceSpans": []}', "the file holds no spans"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}', "without a spanId"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "zz"}]}]}]}', "is not hex"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "0102030405060708",'
            b' "attributes": [{"key": "a", "value": {"intValue": "x"}}]}]}]}]}',
            "resourceSpans.scopeSpans.spans.attributes.value.intValue: invalid literal",
        ),
    ],
)
def test_a_file_that_is_no_trace_is_one_error_line(
    tmp_path: Path, capsys: Any, content: bytes, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert main(["otel", "import", str(bad), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sandbox: error: ") and message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "store" / "runs").exists()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)


SPAN = st.fixed_dictionaries(
    {"spanId": st.text(min_size=1, max_size=4)},
    optional={
        "parentSpanId": JSON,
        "traceId": JSON,
        "name": JSON,
        "startTimeUnixNano": JSON,
        "endTimeUnixNano": JSON,
        "status": JSON | st.fixed_dictionaries({"code": st.just(2), "message": JSON}),
        "events": JSON
        | st.lists(st.fixed_dictionaries({"name": st.just("exception"), "attributes": JSON})),
        "attributes": JSON
        | st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.sampled_from(["gen_ai.operation.name", "gen_ai.input.messages", "x"]),
                    "value": JSON
                    | st.fixed_dictionaries({"intValue": JSON})
                    | st.fixed_dictionaries({"arrayValue": JSON})
                    | st.fixed_dictionaries({"kvlistValue": JSON}),
                }
            ),
            max_size=3,
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    JSON
    | st.fixed_dictionaries({"resourceSpans": st.lists(JSON, max_size=3)})
    | st.lists(SPAN, max_size=3).map(
        lambda spans: {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    )
)
def test_reading_any_json_raises_only_the_import_error(value: Any) -> None:
    """Untrusted input: whatever the file holds, reading it either gives spans or one
    :class:`OTelImportError`, and a run made of them is valid or refused the same way."""
    try:
        spans = read_spans(json.dumps(value).encode())
        snapshot = snapshot_from_spans(
            pick_trace(spans, None) if len({s.trace_id for s in spans}) == 1 else spans[:1]
        )
    except OTelImportError:
        return
    assert snapshot.manifest.status == "complete"
