"""The Phoenix round trip: a captured run sent with ``sandbox otel export --endpoint`` to a
real Arize Phoenix server (started here on free loopback ports, its data in a temporary
folder, its telemetry and external resources off), and read back through Phoenix's REST API
with its model, messages and tool calls.

Phoenix runs from its own venv (``make pytest`` makes ``.venv-phoenix``; ``$SANDBOX_PHOENIX``
names another ``phoenix`` program): without it the test skips, and fails when ``CI=true``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Captured
from otel_agent import USER

from cli.main import main

STARTUP_SECONDS = 180
REPO = Path(__file__).resolve().parents[3]
DEMO = "demo-orders-duplicate"


def _phoenix_program() -> Path:
    program = Path(os.environ.get("SANDBOX_PHOENIX") or REPO / ".venv-phoenix" / "bin" / "phoenix")
    if not program.is_file():
        problem = f"no Phoenix server program at {program} (make pytest installs it)"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(problem)
        pytest.skip(problem)
    return program


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server for the module's tests (each exports into a project of its own);
    yields its base URL."""
    tmp_path = tmp_path_factory.mktemp("phoenix")
    program = _phoenix_program()
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    log = (tmp_path / "phoenix.log").open("wb")
    server = subprocess.Popen(
        [str(program), "serve"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if server.poll() is not None:
                pytest.fail(f"Phoenix exited with {server.returncode}: see {log.name}")
            try:
                if httpx.get(f"{url}/v1/projects", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not answer within {STARTUP_SECONDS} s: see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _spans(url: str, project: str, expected: int) -> list[dict[str, Any]]:
    """The project's spans, once Phoenix has ingested ``expected`` of them (it writes in the
    background)."""
    deadline = time.monotonic() + 30
    while True:
        reply = httpx.get(f"{url}/v1/projects/{project}/spans", params={"limit": 100}, timeout=10)
        spans: list[dict[str, Any]] = reply.json()["data"] if reply.status_code == 200 else []
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_phoenix_returns_the_exported_run_with_its_model_messages_and_tool_calls(
    captured: Captured, phoenix: str, capsys: Any
) -> None:
    code = main(
        [
            "otel", "export", captured.run_id, "--endpoint", phoenix,
            "--project", "kettle", "--store", str(captured.store.root),
        ]
    )  # fmt: skip
    assert code == 0
    sent = int(capsys.readouterr().out.split()[1])  # "sent N spans of RUN to URL"
    spans = _spans(phoenix, "kettle", sent)
    assert len(spans) == sent

    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["name"] == "invoke_agent kettle"
    assert root["span_kind"] == "AGENT"
    assert root["attributes"]["sandbox.run_id"] == captured.run_id
    assert len({s["context"]["trace_id"] for s in spans}) == 1

    llm = sorted((s for s in spans if s["span_kind"] == "LLM"), key=lambda s: s["start_time"])
    assert [s["name"] for s in llm] == ["chat scripted-1", "chat scripted-1"]
    assert all(s["parent_id"] == root["context"]["span_id"] for s in llm)
    first, second = (s["attributes"] for s in llm)
    assert first["llm.model_name"] == first["gen_ai.request.model"] == "scripted-1"
    assert first["llm.input_messages.1.message.role"] == "user"
    assert first["llm.input_messages.1.message.content"] == USER
    call = "llm.output_messages.0.message.tool_calls.0.tool_call"
    assert first[f"{call}.function.name"] == "check_stock"
    assert json.loads(first[f"{call}.function.arguments"]) == {"sku": "K-7"}
    assert second["llm.input_messages.3.message.role"] == "tool"
    assert second["llm.output_messages.0.message.content"] == "Yes, K-7 is in stock (0 left)."
    assert json.loads(second["gen_ai.output.messages"])[0]["finish_reason"] == "stop"

    (tool,) = [s for s in spans if s["span_kind"] == "TOOL"]
    assert tool["name"] == "execute_tool check_stock"
    assert tool["attributes"]["tool.name"] == "check_stock"
    assert json.loads(tool["attributes"]["output.value"]) == {"sku": "K-7", "qty": 0}


def _error_roots(url: str, project: str) -> list[dict[str, Any]]:
    """The project's root spans that ended in an error: Phoenix's errors filter."""
    deadline = time.monotonic() + 30
    while True:
        reply = httpx.get(
            f"{url}/v1/projects/{project}/spans",
            params={"status_code": "ERROR", "parent_id": "null", "limit": 100},
            timeout=10,
        )
        spans: list[dict[str, Any]] = reply.json()["data"] if reply.status_code == 200 else []
        if spans or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_phoenix_errors_filter_finds_the_failed_demo_run(phoenix: str, capsys: Any) -> None:
    store = ["--store", str(REPO / "snapshots")]
    code = main(["otel", "export", DEMO, "--endpoint", phoenix, "--project", "demo", *store])
    assert code == 0
    capsys.readouterr()
    (root,) = _error_roots(phoenix, "demo")
    assert root["name"] == "invoke_agent orders"
    assert root["attributes"]["sandbox.run_id"] == DEMO
    assert root["status_code"] == "ERROR"
    assert root["status_message"] == "the same order was inserted twice"
    reply = httpx.get(f"{phoenix}/v1/projects/demo/spans", params={"limit": 100}, timeout=10)
    names = [s["name"] for s in reply.json()["data"]]
    assert not [n for n in names if n.startswith(("random", "uuid"))]
