"""The WSGI middleware on a real Flask app served by werkzeug's server: one run a request,
kept when it fails (a 500 Flask answers for an exception it caught), holding the request's
body and redacted headers, open while the server reads a streamed answer; its replay sends
the request through the app itself (no entrypoint given), with the server stopped."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask, Response, request, stream_with_context
from werkzeug.serving import make_server

from sandbox import capture
from sandbox.capture.wsgi import CaptureWSGIMiddleware
from sandbox.names import REQUEST_EVENT
from sandbox.replay import replay
from sandbox.snapshot.events import StateTransition, ToolCall
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import DirectoryStore
from tests.replayed import bytes_on_disk, reproduced_then_gone

TOKEN_ENV = "WSGI_TEST_TOKEN"
TOKEN = "tok-live-0a9b8c7d6e5f44332211"
FIXED = {"on": False}


@capture.tool
def reserve(item: str, qty: int) -> dict[str, Any]:
    return {"item": item, "qty": qty}


def flask_app(store: Path) -> Flask:
    app = Flask("orders")
    app.wsgi_app = CaptureWSGIMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, store=str(store), services="none", keep="failed"
    )

    @app.post("/orders")
    def order() -> Any:
        if request.headers.get("authorization") != f"Bearer {os.environ[TOKEN_ENV]}":
            return {"error": "unauthorized"}, 401
        body = request.get_json()
        done = reserve(body["item"], body["qty"])
        if body["qty"] > 5 and not FIXED["on"]:
            raise ValueError(f"no stock for {body['qty']}")  # Flask answers it with a 500
        return done

    @app.get("/stream/<item>")
    def stream(item: str) -> Response:
        def lines() -> Iterator[str]:
            yield "start\n"
            reserve(item, 1)  # made while the server reads the answer: still the run's
            capture.mark_failed("streamed order")
            yield "end\n"

        return Response(stream_with_context(lines()), mimetype="text/plain")

    return app


def _kept(store: Path, count: int) -> list[Manifest]:
    """The ``count`` runs kept in ``store``, once the server has closed their answers (a
    client has the whole answer before the server closes it and the run ends)."""
    deadline = time.monotonic() + 30
    while True:
        assert capture.flush(30)
        runs = DirectoryStore(store).list()
        if len(runs) >= count or time.monotonic() > deadline:
            assert len(runs) == count, runs
            return runs
        time.sleep(0.05)


APP: Any = None
"""The app of the test running, at this module's top level as a service's is."""


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    store = tmp_path / "store"
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    monkeypatch.setattr(f"{__name__}.APP", flask_app(store))
    server = make_server("127.0.0.1", 0, APP, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", store
    finally:
        server.shutdown()
        thread.join(10)


def test_a_failed_flask_request_is_kept_and_replays_through_the_app_itself(
    served: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of an order that works and one that raises (Flask's 500), only the second is kept,
    with its JSON body and its bearer token as a placeholder (on disk nowhere); its
    entrypoint is the app; replayed with the server stopped and another token given for
    the variable: reproduced 2/2 with no divergence; fixed, gone."""
    base, store = served
    with httpx.Client(base_url=base, headers={"authorization": f"Bearer {TOKEN}"}) as client:
        assert client.post("/orders", json={"item": "pen", "qty": 1}).status_code == 200
        assert client.post("/orders", json={"item": "ink", "qty": 9}).status_code == 500
    (manifest,) = _kept(store, 1)
    assert manifest.name == "POST /orders"
    assert manifest.entrypoint is not None
    assert manifest.entrypoint.target == f"{__name__}:APP"
    events = DirectoryStore(store).load_events(manifest.run_id)
    (inbound,) = [e for e in events if isinstance(e, StateTransition) and e.name == REQUEST_EVENT]
    assert inbound.data["json"] == {"item": "ink", "qty": 9}
    headers = inbound.data["headers"]
    assert isinstance(headers, dict) and str(headers["authorization"]).startswith("Bearer <red")
    assert TOKEN.encode() not in bytes_on_disk(store)
    monkeypatch.setenv(TOKEN_ENV, "another-token-the-user-gives")
    reproduced_then_gone(manifest.run_id, store, FIXED)


def test_the_first_requests_served_at_once_all_replay_through_the_app(
    served: tuple[str, Path],
) -> None:
    """Eight failing requests sent together as the app's first: every kept run's entrypoint
    is the app (the first ones wait while it is looked for; before, those served during
    the look kept the server's command line, and their replay never reached them)."""
    base, store = served
    start = threading.Barrier(8)
    codes: list[int] = []

    def post() -> None:
        start.wait(10)
        answer = httpx.post(
            f"{base}/orders",
            json={"item": "ink", "qty": 9},
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        codes.append(answer.status_code)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert codes == [500] * 8
    runs = _kept(store, 8)
    assert {m.entrypoint.target if m.entrypoint else None for m in runs} == {f"{__name__}:APP"}


def test_a_streamed_answer_is_the_runs_until_the_server_closes_it(
    served: tuple[str, Path],
) -> None:
    base, store = served
    answer = httpx.get(f"{base}/stream/cup")
    assert answer.text == "start\nend\n"
    (manifest,) = _kept(store, 1)
    tools = [e for e in DirectoryStore(store).load_events(manifest.run_id) if e.kind == "tool"]
    assert [t.args for t in tools if isinstance(t, ToolCall)] == [{"item": "cup", "qty": 1}]
    assert manifest.failure is not None and manifest.failure.reason == "streamed order"
    report = replay(manifest.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()


def test_an_app_no_module_holds_is_named_once_on_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    def hello(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("content-type", "text/plain")])
        body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
        return [json.dumps({"read": body.decode()}).encode()]

    app = CaptureWSGIMiddleware(hello, store=str(tmp_path / "store"), services="none")
    server = make_server("127.0.0.1", 0, app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for _ in range(2):
            answer = httpx.post(f"http://127.0.0.1:{server.server_port}/x", content=b"hi")
            assert answer.json() == {"read": "hi"}
    finally:
        server.shutdown()
        thread.join(10)
    runs = _kept(tmp_path / "store", 2)
    assert capfd.readouterr().err.count("CaptureWSGIMiddleware cannot find its app") == 1
    for manifest in runs:
        events = DirectoryStore(tmp_path / "store").load_events(manifest.run_id)
        (inbound,) = [e for e in events if e.name == REQUEST_EVENT]
        assert isinstance(inbound, StateTransition) and inbound.data["text"] == "hi"
