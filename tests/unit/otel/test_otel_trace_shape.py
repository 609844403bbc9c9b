"""The shape of an exported trace as trace viewers read it: a failed run's root span is
``ERROR`` (Phoenix's errors filter finds it), failed steps are ``ERROR`` with an exception
event, random draws are span events (never spans), MCP protocol calls are no tool
executions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli.main import main
from sandbox.otel.export import FAILURE_EXCEPTION, RANDOM_EVENT
from sandbox.otel.importer import read_spans, snapshot_from_spans
from sandbox.snapshot import Manifest, Snapshot
from sandbox.snapshot.events import FinalResult, MCPInfo, RandomDraw, ToolCall
from sandbox.snapshot.store import DirectoryStore

SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots"
DEMO = "demo-orders-duplicate"


def _spans(path: Path) -> list[dict[str, Any]]:
    body = json.loads(path.read_text())
    return [s for r in body["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]


def _attrs(item: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in item.get("attributes", [])}


def _export(store: Path, run_id: str, out: Path) -> list[dict[str, Any]]:
    assert main(["otel", "export", run_id, "--file", str(out), "--store", str(store)]) == 0
    return _spans(out)


def test_the_failed_demo_runs_root_span_is_an_error_with_its_failure(tmp_path: Path) -> None:
    spans = _export(SNAPSHOTS, DEMO, tmp_path / "t.json")
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    assert root["name"] == "invoke_agent orders"
    assert _attrs(root)["gen_ai.operation.name"] == "invoke_agent"
    assert _attrs(root)["openinference.span.kind"] == "AGENT"
    assert root["status"] == {"code": 2, "message": "the same order was inserted twice"}
    (exception,) = [e for e in root["events"] if e["name"] == "exception"]
    assert _attrs(exception) == {
        "exception.type": FAILURE_EXCEPTION,
        "exception.message": "the same order was inserted twice",
    }
    failed = {s["name"]: s for s in spans if s.get("status", {}).get("code") == 2}
    charge = failed["POST http://127.0.0.1:35895/charge"]
    assert charge["status"]["message"] == "httpx.ReadTimeout: timed out"
    assert [e["name"] for e in charge["events"]] == ["exception"]
    assert failed["timeout retry:place_order"]["status"]["message"].startswith(
        "TimeoutError: timed out after 0.34 s"
    )
    assert "execute_tool place_order" not in failed  # the call that succeeded in the end


def test_random_draws_are_events_of_their_step_never_spans(tmp_path: Path) -> None:
    spans = _export(SNAPSHOTS, DEMO, tmp_path / "t.json")
    assert not [s for s in spans if s["name"].startswith(("random", "uuid", "os.urandom"))]
    assert not [s for s in spans if _attrs(s).get("sandbox.kind") == "random"]
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    draws = [_attrs(e) for e in root["events"] if e["name"] == RANDOM_EVENT]
    assert [d["sandbox.random.source"] for d in draws] == ["random.seed", "uuid4", "uuid4"]
    assert [int(d["sandbox.seq"]) for d in draws] == [0, 1, 12]
    assert all("sandbox.random.value" in d for d in draws[1:])


def _mcp_run(tmp_path: Path) -> DirectoryStore:
    store = DirectoryStore(tmp_path / "store")
    transport = {"kind": "stdio", "command": ["python", "-m", "orders"]}

    def request(seq: int, method: str, name: str, **fields: Any) -> ToolCall:
        return ToolCall(
            seq=seq,
            wall=100.0 + seq,
            mono=float(seq),
            span=seq,
            name=name,
            mcp=MCPInfo(server="orders-desk", method=method, transport=transport),  # type: ignore[arg-type]
            **fields,
        )

    events = [
        request(0, "initialize", "mcp:orders-desk:initialize", output='{"serverInfo": {}}'),
        request(1, "tools/list", "mcp:orders-desk:tools/list", output='{"tools": []}'),
        RandomDraw(seq=2, wall=102.5, mono=2.5, span=2, parent_span=3, source="uuid4", value="u"),
        request(3, "tools/call", "mcp:orders-desk/order_status", args={"order_id": 7}, output="{}"),
        FinalResult(seq=4, wall=104.0, mono=4.0, value={"answer": "ok"}),
    ]
    manifest = Manifest(
        run_id="mcp-run", name="desk", created=datetime(2024, 3, 1, tzinfo=UTC), status="complete"
    )
    store.save(Snapshot(manifest, events))
    return store


def test_mcp_protocol_calls_are_their_own_span_type_and_only_tools_call_executes_a_tool(
    tmp_path: Path,
) -> None:
    store = _mcp_run(tmp_path)
    spans = {s["name"]: s for s in _export(store.root, "mcp-run", tmp_path / "t.json")}
    assert set(spans) == {
        "invoke_agent desk",
        "initialize orders-desk",
        "tools/list orders-desk",
        "execute_tool mcp:orders-desk/order_status",
    }
    for name in ("initialize orders-desk", "tools/list orders-desk"):
        attrs = _attrs(spans[name])
        assert "gen_ai.operation.name" not in attrs
        assert attrs["openinference.span.kind"] == "CHAIN"
        assert attrs["mcp.method.name"] == name.split()[0]
    call = spans["execute_tool mcp:orders-desk/order_status"]
    assert _attrs(call)["gen_ai.operation.name"] == "execute_tool"
    assert _attrs(call)["mcp.method.name"] == "tools/call"
    assert [e["name"] for e in call["events"]] == [RANDOM_EVENT]  # drawn inside the call
    assert "status" not in spans["invoke_agent desk"] or not spans["invoke_agent desk"]["status"]


def test_an_exported_failed_run_imports_with_its_failure_and_no_exception(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    _export(SNAPSHOTS, DEMO, out)
    run = snapshot_from_spans(read_spans(out.read_bytes()))
    assert run.manifest.failure is not None
    assert run.manifest.failure.reason == "the same order was inserted twice"
    (final,) = [e for e in run.events if isinstance(e, FinalResult)]
    assert final.error is None
    assert run.manifest.name == "orders"
    assert [e.name for e in run.events if isinstance(e, ToolCall)] == [
        "insert_order",
        "insert_order",
        "place_order",
    ]
