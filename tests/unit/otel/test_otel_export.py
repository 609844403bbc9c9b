"""``sandbox otel export --file``: a captured run as OTLP/JSON, with GenAI and OpenInference
attributes, spans nested under the run, times from the recording, a replay linked to its
original."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import ENTRYPOINT, Captured
from otel_agent import SYSTEM, USER

from cli.main import main
from sandbox.otel.export import span_id_of, trace_id_of
from sandbox.replay import replay
from sandbox.snapshot.events import LLMCall, ToolCall


def _spans(path: Path) -> list[dict[str, Any]]:
    body = json.loads(path.read_text())
    return [
        span
        for resource in body["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def _export(captured: Captured, run_id: str, out: Path) -> list[dict[str, Any]]:
    code = main(["otel", "export", run_id, "--file", str(out), "--store", str(captured.store.root)])
    assert code == 0
    return _spans(out)


def test_export_file_carries_model_calls_and_tool_calls_nested_under_the_run(
    captured: Captured, tmp_path: Path
) -> None:
    spans = _export(captured, captured.run_id, tmp_path / "trace.json")
    events = captured.store.load(captured.run_id).events
    root = [s for s in spans if "parentSpanId" not in s]
    assert [s["name"] for s in root] == ["invoke_agent kettle"]
    assert root[0]["traceId"] == f"{trace_id_of(captured.run_id):032x}"
    assert root[0]["spanId"] == f"{span_id_of(captured.run_id, 'root'):016x}"
    assert json.loads(_attrs(root[0])["sandbox.failure"])["predicate"]["value"] == "is in stock"
    assert json.loads(_attrs(root[0])["output.value"])["answer"].startswith("Yes, K-7 is in stock")

    llm = [s for s in spans if _attrs(s).get("openinference.span.kind") == "LLM"]
    recorded_llm = [e for e in events if isinstance(e, LLMCall)]
    assert [s["name"] for s in llm] == ["chat scripted-1", "chat scripted-1"]
    assert all(s["parentSpanId"] == root[0]["spanId"] for s in llm)
    assert not [s for s in spans if _attrs(s).get("sandbox.kind") == "http"]  # folded
    first, second = (_attrs(s) for s in llm)
    assert _attrs(root[0])["gen_ai.operation.name"] == "invoke_agent"
    assert _attrs(root[0])["gen_ai.input.messages"] == first["gen_ai.input.messages"]
    assert _attrs(root[0])["gen_ai.output.messages"] == second["gen_ai.output.messages"]
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.request.model"] == "scripted-1"
    assert first["gen_ai.request.temperature"] == "0"  # the agent sent the int 0
    assert first["gen_ai.usage.input_tokens"] == "10"  # int64 as a JSON string
    assert json.loads(first["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": USER}]},
    ]
    assert json.loads(first["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_0_0",
                    "name": "check_stock",
                    "arguments": '{"sku": "K-7"}',
                }
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert first["llm.input_messages.1.message.content"] == USER
    assert first["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == (
        "check_stock"
    )
    assert json.loads(first["llm.tools.0.tool.json_schema"])["function"]["name"] == "check_stock"
    assert second["llm.input_messages.3.message.role"] == "tool"
    assert second["llm.output_messages.0.message.content"] == "Yes, K-7 is in stock (0 left)."
    for span, event in zip(llm, recorded_llm, strict=True):
        assert int(span["endTimeUnixNano"]) == round(event.wall * 1e9)
        assert int(span["startTimeUnixNano"]) == round((event.wall - event.duration) * 1e9)

    tools = [s for s in spans if _attrs(s).get("openinference.span.kind") == "TOOL"]
    (tool,) = tools
    tool_event = next(e for e in events if isinstance(e, ToolCall))
    assert tool["name"] == "execute_tool check_stock"
    assert tool["parentSpanId"] == root[0]["spanId"]
    assert _attrs(tool)["tool.name"] == "check_stock"
    assert json.loads(_attrs(tool)["input.value"]) == {"sku": "K-7"}
    assert json.loads(_attrs(tool)["output.value"]) == {"sku": "K-7", "qty": 0}
    assert int(tool["endTimeUnixNano"]) == round(tool_event.wall * 1e9)


def test_a_replay_exported_links_to_the_root_span_of_its_original(
    captured: Captured, tmp_path: Path
) -> None:
    report = replay(captured.run_id, store=captured.store, entrypoint=ENTRYPOINT)
    assert report.verdict.reproduced == 1
    (replay_id,) = report.replays
    spans = _export(captured, replay_id, tmp_path / "replay.json")
    (root,) = [s for s in spans if "parentSpanId" not in s]
    assert _attrs(root)["sandbox.replay_of"] == captured.run_id
    (link,) = root["links"]
    assert link["traceId"] == f"{trace_id_of(captured.run_id):032x}"
    assert link["spanId"] == f"{span_id_of(captured.run_id, 'root'):016x}"
    assert root["traceId"] != link["traceId"]


def test_export_needs_a_destination_and_a_known_run(
    captured: Captured, tmp_path: Path, capsys: Any
) -> None:
    store = ["--store", str(captured.store.root)]
    assert main(["otel", "export", captured.run_id, *store]) == 2
    assert "give --endpoint URL, --file out.json, or both" in capsys.readouterr().err
    assert main(["otel", "export", "no-such-run", "--file", str(tmp_path / "x.json"), *store]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_a_responses_api_run_exports_its_tool_calls_and_their_outputs_as_messages(
    tmp_path: Path,
) -> None:
    """The OpenAI Agents SDK on the Responses API sends a tool call back as a
    ``function_call`` input item and its output as a ``function_call_output`` one: exported
    as the assistant's tool call and the tool's response, not as empty user messages."""
    from examples import openai_agents_responses_agent
    from sandbox import capture
    from sandbox.snapshot.store import DirectoryStore

    store = DirectoryStore(tmp_path / "store")
    with capture.run("refunds", store=store, packages=False) as rec:
        openai_agents_responses_agent.main()
    out = tmp_path / "trace.json"
    code = main(["otel", "export", rec.run_id, "--file", str(out), "--store", str(store.root)])
    assert code == 0
    llm = [_attrs(s) for s in _spans(out) if _attrs(s).get("openinference.span.kind") == "LLM"]
    assert [a["sandbox.llm.api"] for a in llm] == ["openai.responses"] * 3
    sent = json.loads(llm[1]["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    (call,) = sent[2]["parts"]
    assert call["type"] == "tool_call" and call["name"] == "order_status"
    assert json.loads(call["arguments"]) == {"order_id": 7}
    (answer,) = sent[3]["parts"]
    assert answer["type"] == "tool_call_response" and answer["id"] == call["id"]
    assert "delivered" in answer["response"]
    assert llm[1]["llm.input_messages.2.message.tool_calls.0.tool_call.function.name"] == (
        "order_status"
    )
    assert llm[1]["llm.input_messages.3.message.role"] == "tool"
