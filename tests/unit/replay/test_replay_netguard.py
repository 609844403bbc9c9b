"""No way out of an in-process replay: an agent that reaches for an address no policy serves
live gets a refusal naming host, port and policy, and the replay is inconclusive, never
"gone", even when the agent swallows the error; a model call the recording has no answer for
goes where it was sent under ``--miss live``. The model calls of the ``openai`` client on
its aiohttp transport, and aiohttp's own requests, are captured and served from the
recording.

A real HTTP server on 127.0.0.1 plays the model provider and the stock service; the agent
reaches it with urllib3's own pool, a raw socket (neither recorded), aiohttp and the
aiohttp-based ``openai`` client (recorded); ``requests`` is recorded (its replay:
``tests/unit/capture/test_capture_requests.py``; aiohttp's:
``tests/unit/capture/test_capture_aiohttp.py``)."""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import requests
import urllib3

from sandbox import capture
from sandbox.replay import PolicySet, replay
from sandbox.replay.isolation.netguard import REFUSED_EVENT
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

SERVER: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "hits": []}
SETTINGS = {"reach": "urllib3", "question": "is the order a duplicate?"}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _json(self, data: object) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        SERVER["hits"].append(self.path)
        self._json({"duplicate": True})

    def do_POST(self) -> None:
        SERVER["hits"].append(self.path)
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self._json(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": '{"duplicate": true}'},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )


@pytest.fixture(autouse=True)
def server() -> Iterator[None]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    SERVER["port"] = httpd.server_address[1]
    SERVER["hits"] = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()


def _base() -> str:
    return f"http://{SERVER['host']}:{SERVER['port']}"


async def _ask(question: str) -> dict[str, Any]:
    """The model, through the ``openai`` client on its aiohttp transport."""
    async with openai.AsyncOpenAI(
        base_url=f"{_base()}/v1", api_key="sk-test", http_client=openai.DefaultAioHttpClient()
    ) as client:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": question}]
        )
    data: dict[str, Any] = json.loads(reply.choices[0].message.content or "{}")
    return data


async def _aiohttp_get() -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(f"{_base()}/stock") as resp:
        data: dict[str, Any] = await resp.json()
        return data


def _raw_socket() -> dict[str, Any]:
    with socket.create_connection((SERVER["host"], SERVER["port"]), timeout=5) as sock:
        sock.sendall(b"GET /stock HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    parsed: dict[str, Any] = json.loads(data.split(b"\r\n\r\n", 1)[1])
    return parsed


REACH: dict[str, Callable[[], dict[str, Any]]] = {
    "urllib3": lambda: urllib3.PoolManager().request("GET", f"{_base()}/stock", timeout=5).json(),
    "aiohttp": lambda: asyncio.run(_aiohttp_get()),
    "socket": _raw_socket,
    "openai-aiohttp": lambda: asyncio.run(_ask(SETTINGS["question"])),
}


def agent() -> str:
    """Asks the model (recorded), then checks the stock; an error there is swallowed, as
    agents do, and the run ends without the failure."""
    asyncio.run(_ask("plan the order"))
    try:
        stock = REACH[SETTINGS["reach"]]()
    except Exception as exc:
        return f"stock check skipped: {type(exc).__name__}"
    if stock["duplicate"]:
        raise RuntimeError("order placed twice")
    return "ok"


def _capture(store: DirectoryStore, reach: str) -> str:
    SETTINGS.update(reach=reach, question="is the order a duplicate?")
    with (
        pytest.raises(RuntimeError, match="placed twice"),
        capture.run(
            "net",
            store=store,
            seed=1,
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:agent"),
            packages=False,
        ) as rec,
    ):
        agent()
    return rec.run_id


@pytest.mark.parametrize("reach", sorted(set(REACH) - {"openai-aiohttp", "aiohttp"}))
def test_a_reach_outside_the_sandbox_is_refused_and_the_replay_is_inconclusive(
    tmp_path: Path, reach: str
) -> None:
    """A connection made outside any crossing is refused, --miss live or not."""
    store = DirectoryStore(tmp_path)
    run_id = _capture(store, reach)
    llm = [e for e in store.load_events(run_id) if e.kind == "llm"]
    assert len(llm) == 1
    hits = len(SERVER["hits"])
    report = replay(run_id, store=store, times=2, miss="live")

    assert len(SERVER["hits"]) == hits  # nothing reached the server: the recorded model call
    # was served from the recording, the stock check was refused before connecting
    target = f"127.0.0.1:{SERVER['port']}"
    assert report.exit_code == 2
    assert report.verdict.reproduced == 0
    assert [r.detail.startswith("inconclusive: ") for r in report.verdict.runs] == [True, True]
    assert [(r.outcome, r.reason) for r in report.verdict.runs] == [("inconclusive", "refused")] * 2
    (line,) = report.refused
    assert f"replay refused a connection to {target}" in line
    assert f"--live 'http:{target}'" in line
    assert any("refused" in note for note in report.notes)
    assert not any(
        note.startswith(("The failure is gone", "The failure did not reproduce"))
        for note in report.notes
    )
    for replayed in report.replays:
        refused = [e for e in store.load_events(replayed) if e.name == REFUSED_EVENT]
        assert len(refused) == 1
        assert refused[0].data["port"] == SERVER["port"]  # type: ignore[union-attr]


def test_a_model_call_the_recording_lacks_reaches_a_running_loopback_model_under_miss_live(
    tmp_path: Path,
) -> None:
    """--miss live: the model request the recording has no answer for goes live and reaches
    the loopback model that was running before the replay (no policy names it); the recorded
    model call is still answered from the recording."""
    store = DirectoryStore(tmp_path)
    run_id = _capture(store, "openai-aiohttp")
    assert len([e for e in store.load_events(run_id) if e.kind == "llm"]) == 2
    hits = len(SERVER["hits"])
    SETTINGS["question"] = "is the order a duplicate? (asked differently)"
    report = replay(run_id, store=store, miss="live")
    assert report.refused == []
    assert SERVER["hits"][hits:] == ["/v1/chat/completions"]  # the missed call alone went out
    assert report.verdict.reproduced == 1 and report.exit_code == 1


@pytest.mark.parametrize("reach", sorted(REACH))
def test_a_policy_naming_the_address_live_lets_it_through(tmp_path: Path, reach: str) -> None:
    """The control: the same replay with the address served live reproduces the failure."""
    store = DirectoryStore(tmp_path)
    run_id = _capture(store, reach)
    SETTINGS["question"] = "is the order a duplicate? (asked differently)"
    policies = PolicySet().with_rule("live", f"http:127.0.0.1:{SERVER['port']}")
    report = replay(run_id, store=store, miss="live", policies=policies)
    assert report.refused == []
    assert report.verdict.reproduced == 1
    assert report.exit_code == 1


def test_name_lookups_outside_the_sandbox_are_refused(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    run_id = _capture(store, "urllib3")
    SERVER["host"] = "sandbox-no-such-host.invalid"
    try:
        report = replay(run_id, store=store)
    finally:
        SERVER["host"] = "127.0.0.1"
    (line,) = report.refused
    assert "a name lookup (DNS) of sandbox-no-such-host.invalid" in line
    assert report.exit_code == 2


def agent_with_its_own_server() -> str:
    """Starts a stock server of its own during the run and asks it: that stays inside."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/stock"
        stock = requests.get(url, timeout=5).json()
    finally:
        httpd.shutdown()
        httpd.server_close()
    if stock["duplicate"]:
        raise RuntimeError("order placed twice")
    return "ok"


def test_a_server_the_agent_starts_itself_is_reachable(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    entry = Entrypoint(kind="callable", target=f"{__name__}:agent_with_its_own_server")
    with (
        pytest.raises(RuntimeError),
        capture.run("own", store=store, seed=1, entrypoint=entry, packages=False) as rec,
    ):
        agent_with_its_own_server()
    report = replay(rec.run_id, store=store, times=2)
    assert report.refused == []
    assert report.verdict.reproduced == 2


READS_AT_IMPORT = """
import urllib3

try:
    CONFIG = urllib3.PoolManager().request("GET", "{base}/config", timeout=5).json()  # at import
except Exception:
    CONFIG = {{}}  # caught, as a module with a default does


def agent():
    if CONFIG.get("duplicate"):
        raise RuntimeError("order placed twice")
    return "ok"
"""


def _capture_module(
    name: str, store: DirectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The module ``name`` (:data:`READS_AT_IMPORT`), written and imported as the agent's
    own, its run captured; then forgotten, as a new process would not have it."""
    (tmp_path / f"{name}.py").write_text(READS_AT_IMPORT.format(base=_base()))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    entry = Entrypoint(kind="callable", target=f"{name}:agent")
    try:
        with (
            pytest.raises(RuntimeError),
            capture.run("reads", store=store, seed=1, entrypoint=entry, packages=False) as rec,
        ):
            module.agent()
    finally:
        del sys.modules[name]
    return rec.run_id


def test_a_module_that_reaches_outside_as_it_is_imported_is_refused_then_and_in_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay imports the entrypoint's module before its runs: its request there is
    refused, and since the module caught the refusal it is imported again in the run, where
    the request is refused again, and named. Nothing reaches the server; the replay is
    inconclusive, not "gone"."""
    store = DirectoryStore(tmp_path / "store")
    run_id = _capture_module("refusedatimport", store, tmp_path, monkeypatch)
    assert SERVER["hits"] == ["/config"]  # the capture's own import
    report = replay(run_id, store=store)
    assert SERVER["hits"] == ["/config"]
    assert [(r.outcome, r.reason) for r in report.verdict.runs] == [("inconclusive", "refused")]
    (line,) = report.refused
    assert f"replay refused a connection to 127.0.0.1:{SERVER['port']}" in line
    assert report.exit_code == 2


def test_a_module_reaching_an_address_served_live_is_imported_once_before_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the address served live, the import before the runs reaches it,
    the runs use that module, and the failure reproduces in both."""
    store = DirectoryStore(tmp_path / "store")
    run_id = _capture_module("liveatimport", store, tmp_path, monkeypatch)
    policies = PolicySet().with_rule("live", f"http:127.0.0.1:{SERVER['port']}")
    report = replay(run_id, store=store, policies=policies, times=2)
    assert SERVER["hits"] == ["/config", "/config"]
    assert report.refused == []
    assert report.verdict.reproduced == 2
