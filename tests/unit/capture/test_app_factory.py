"""An app made by a factory (Flask's ``create_app``, ``uvicorn --factory``), which no module
holds: its middleware, given no entrypoint, records the factory (``module:create_app()``)
and each replay makes the app again and sends the run's request through it, with the
server stopped. A function that makes the app and goes on serving it is no factory."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, HTTPException
from flask import Flask, request
from werkzeug.serving import make_server

from sandbox import capture
from sandbox.capture.asgi import CaptureMiddleware
from sandbox.capture.served import MadeApp
from sandbox.capture.wsgi import CaptureWSGIMiddleware
from sandbox.errors import ReplayError
from sandbox.replay.isolation.trust import defined_in_project
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import DirectoryStore
from tests.replayed import reproduced_then_gone

FIXED = {"on": False}
STORE: dict[str, str] = {}
"""Where the apps the factories below make keep their runs (set by each test)."""


@capture.tool
def reserve(item: str, qty: int) -> dict[str, Any]:
    return {"item": item, "qty": qty}


def _order(item: str, qty: int) -> dict[str, Any]:
    done = reserve(item, qty)
    if qty > 5 and not FIXED["on"]:
        raise ValueError(f"no stock for {qty}")
    return done


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Flask's application factory, as its tutorial writes one."""
    app = Flask("shop")
    app.config.update(config or {})
    app.wsgi_app = CaptureWSGIMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, store=STORE["path"], services="none", keep="failed"
    )

    @app.post("/orders")
    def order() -> Any:
        body = request.get_json()
        return _order(body["item"], body["qty"])

    return app


def create_chat() -> FastAPI:
    """A FastAPI factory, served by ``uvicorn --factory``."""
    app = FastAPI()
    app.add_middleware(CaptureMiddleware, store=STORE["path"], services="none", keep="failed")

    @app.post("/orders")
    def order(body: dict[str, Any]) -> Any:
        try:
            return _order(body["item"], body["qty"])
        except ValueError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None

    return app


def _kept(store: Path) -> Manifest:
    deadline = time.monotonic() + 30
    while not DirectoryStore(store).list() and time.monotonic() < deadline:
        assert capture.flush(30)
        time.sleep(0.05)
    (manifest,) = DirectoryStore(store).list()
    return manifest


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setitem(STORE, "path", str(tmp_path / "store"))
    return tmp_path / "store"


def _serve_wsgi(app: Any) -> tuple[Any, threading.Thread]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def test_a_flask_factorys_failed_request_replays_through_an_app_it_makes(store: Path) -> None:
    """Served from ``create_app()``: the kept 500's entrypoint is the factory; replayed with
    the server stopped, reproduced 2/2 with no divergence, then gone once fixed."""
    server, thread = _serve_wsgi(create_app())
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert httpx.post(f"{base}/orders", json={"item": "pen", "qty": 1}).status_code == 200
        assert httpx.post(f"{base}/orders", json={"item": "ink", "qty": 9}).status_code == 500
    finally:
        server.shutdown()
        thread.join(10)
    manifest = _kept(store)
    assert manifest.entrypoint is not None
    assert manifest.entrypoint.target == f"{__name__}:create_app()"
    reproduced_then_gone(manifest.run_id, store, FIXED)


def test_a_uvicorn_factorys_failed_request_replays_through_an_app_it_makes(store: Path) -> None:
    """Served by uvicorn with ``factory=True`` (FastAPI makes its middleware as the lifespan
    starts, after the factory returned): the factory uvicorn names is the entrypoint; the
    replay reproduces the 503 2/2, then it is gone once fixed."""
    config = uvicorn.Config(
        f"{__name__}:create_chat", factory=True, port=0, lifespan="on", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        answer = httpx.post(f"http://127.0.0.1:{port}/orders", json={"item": "ink", "qty": 9})
        assert answer.status_code == 503
    finally:
        server.should_exit = True
        thread.join(30)
    manifest = _kept(store)
    assert manifest.entrypoint is not None
    assert manifest.entrypoint.target == f"{__name__}:create_chat()"
    reproduced_then_gone(manifest.run_id, store, FIXED)


def serve_and_post() -> int:
    """Makes the app and serves it itself (a script's ``main``): still running when the
    request is served, so no factory."""
    app = Flask("inline")
    app.wsgi_app = CaptureWSGIMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, store=STORE["path"], services="none"
    )

    @app.post("/orders")
    def order() -> Any:
        return reserve("pen", 1)

    server, thread = _serve_wsgi(app)
    try:
        return httpx.post(f"http://127.0.0.1:{server.server_port}/orders", json={}).status_code
    finally:
        server.shutdown()
        thread.join(10)


def test_a_function_still_serving_its_app_is_not_taken_for_its_factory(
    store: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert serve_and_post() == 200
    manifest = _kept(store)
    assert manifest.entrypoint is None or manifest.entrypoint.kind == "command"
    assert capfd.readouterr().err.count("CaptureWSGIMiddleware cannot find its app") == 1


def test_an_imported_run_may_replay_through_a_factory_of_the_project_only(
    tmp_path: Path,
) -> None:
    """For an imported run, the app a project function makes may be sent the request; a
    factory reached through another name, outside the project, or none, not."""
    here = Path.cwd()
    made = MadeApp(create_app, f"{__name__}:create_app()")
    assert defined_in_project(made, f"{__name__}:create_app()", here) is None
    assert defined_in_project(made, f"{__name__}:create_app()", tmp_path) is not None
    assert defined_in_project(made, f"{__name__}:make()", here) is not None
    reached = MadeApp(httpx.get, f"{__name__}:httpx.get()")
    assert defined_in_project(reached, f"{__name__}:httpx.get()", here) is not None
    lambda_made = MadeApp(lambda: create_app(), f"{__name__}:create_app()")
    assert defined_in_project(lambda_made, f"{__name__}:create_app()", here) is not None


def test_a_factory_that_makes_no_capturing_app_is_one_clear_error() -> None:
    with pytest.raises(ReplayError, match="not an app that captures its requests"):
        MadeApp(lambda: Flask("bare"), "shop:create_bare()")()
