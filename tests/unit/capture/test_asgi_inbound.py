"""What a request brings into a captured service run (its headers and body) and what the
app makes in its lifespan: recorded by the middleware, redacted, and made again by
``replay_request``, on a real FastAPI app."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI, Header, HTTPException, Request
from pydantic import BaseModel
from starlette.middleware.trustedhost import TrustedHostMiddleware

from sandbox import capture
from sandbox.capture import inbound
from sandbox.capture.asgi import CaptureMiddleware, replay_request
from sandbox.errors import MissingEnvironmentError
from sandbox.names import REQUEST_EVENT
from sandbox.replay import replay
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.manifest import Entrypoint
from tests.replayed import bytes_on_disk, reproduced_then_gone

TOKEN_ENV = "INBOUND_TEST_TOKEN"
TOKEN = "tok-live-5f4e3d2c1b0a99887766"
PASSWORD = "hunter2-Secret-77"
FIXED = {"on": False}


@capture.tool
def reserve(item: str, qty: int) -> dict[str, Any]:
    return {"item": item, "qty": qty}


class Order(BaseModel):
    item: str
    qty: int
    password: str


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[dict[str, str]]:
    app.state.token = os.environ[TOKEN_ENV]  # a setting read as the app starts
    yield {"instance": str(uuid.uuid4())}  # lifespan state, drawn outside every run


def order_app(store: Path | None = None, **settings: Any) -> FastAPI:
    """Orders over 5 fail (503) until fixed; a request needs the bearer token the lifespan
    read, a JSON body and the host the service is known by; captured into ``store`` when
    given."""
    app = FastAPI(lifespan=_lifespan)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["svc"])
    if store is not None:
        app.add_middleware(
            CaptureMiddleware,
            store=str(store),
            services="none",
            keep="failed",
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:replay_order"),
            **settings,
        )

    @app.post("/orders")
    async def order(body: Order, request: Request, authorization: str = Header()) -> Any:
        if authorization != f"Bearer {request.app.state.token}":
            raise HTTPException(status_code=401)
        assert request.state.instance  # the state the lifespan yielded reaches each request
        done = reserve(body.item, body.qty)
        ticket = str(uuid.uuid4())  # a recorded draw: shifted if the lifespan's were the run's
        if body.qty > 5 and not FIXED["on"]:
            raise HTTPException(status_code=503, detail=f"no stock for {ticket}")
        return {**done, "ticket": ticket}

    return app


REPLAY_ORDERS = order_app()


def replay_order() -> int:
    return replay_request(REPLAY_ORDERS)


async def _post(app: Any, body: bytes | dict[str, Any], token: str = TOKEN) -> int:
    """One POST /orders through ``app`` with its lifespan run, as a server does."""
    async with LifespanManager(app) as running:
        transport = httpx.ASGITransport(app=running.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            headers = {"authorization": f"Bearer {token}"}
            if isinstance(body, bytes):
                headers["content-type"] = "application/json"
                answer = await client.post("/orders", content=body, headers=headers)
            else:
                answer = await client.post("/orders", json=body, headers=headers)
            return answer.status_code


def _captured(store: Path, body: bytes | dict[str, Any]) -> str:
    assert asyncio.run(_post(order_app(store), body)) == 503
    assert capture.flush(30)
    (manifest,) = DirectoryStore(store).list()
    return manifest.run_id


def _request_event(store: Path, run_id: str) -> dict[str, Any]:
    for line in (DirectoryStore(store).run_dir(run_id) / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("name") == REQUEST_EVENT:
            return dict(event["data"])
    raise AssertionError("no request event")


def test_a_requests_body_and_headers_are_recorded_redacted_and_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept run holds the JSON body and the headers with the bearer token and the
    body's password as placeholders (neither is on disk); the variable the lifespan read is
    among the run's; a replay sends the same body, with the token the user supplies for
    that variable where the recording holds its placeholder, to the host it was sent to:
    the 503 reproduces with no divergence (a body not sent would answer 422, a token not
    put back 401, another host 400, the lifespan's draw taken from the run's would change
    the ticket's, its state not handed to the request would fail it), and is gone once
    fixed."""
    store = tmp_path / "store"
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    run_id = _captured(store, {"item": "book", "qty": 7, "password": PASSWORD})
    on_disk = bytes_on_disk(store)
    assert TOKEN.encode() not in on_disk and PASSWORD.encode() not in on_disk
    event = _request_event(store, run_id)
    assert event["json"]["item"] == "book" and event["json"]["qty"] == 7
    assert event["json"]["password"] != PASSWORD
    assert event["headers"]["authorization"].startswith("Bearer <redacted:")
    assert event["headers"]["content-type"] == "application/json"
    assert (event["scheme"], event["headers"]["host"]) == ("http", "svc")
    manifest = DirectoryStore(store).load_manifest(run_id)
    assert manifest.env[TOKEN_ENV] == event["headers"]["authorization"].removeprefix("Bearer ")

    monkeypatch.delenv(TOKEN_ENV)
    with pytest.raises(MissingEnvironmentError, match=TOKEN_ENV):
        replay(run_id, store=store, times=1)
    monkeypatch.setenv(TOKEN_ENV, "any-value-the-user-gives")
    reproduced_then_gone(run_id, store, FIXED)


def test_a_body_over_the_limit_is_left_out_and_its_replay_cannot_be_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body over the limit leaves only its size; its replay says why it cannot send it
    and is inconclusive, never reproduced nor gone."""
    store = tmp_path / "store"
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    monkeypatch.setattr(inbound, "BODY_LIMIT", 16)
    body = json.dumps({"item": "a-long-item-name", "qty": 9, "password": PASSWORD}).encode()
    run_id = _captured(store, body)
    event = _request_event(store, run_id)
    assert event["left_out"] == len(body) and "json" not in event
    report = replay(run_id, store=store, times=1)
    assert report.verdict.inconclusive == 1, report.describe()
    assert "cannot be sent again" in report.describe()


@pytest.mark.parametrize(
    ("data", "content_type", "held"),
    [
        (b'{"a": [1, "x"]}', "application/json; charset=utf-8", {"json": {"a": [1, "x"]}}),
        (b"{not json", "application/json", {"text": "{not json"}),
        (b"q=1&r=two", "application/x-www-form-urlencoded", {"text": "q=1&r=two"}),
        (b"\xff\x00\xfe", "application/octet-stream", {"base64": "/wD+"}),
        (b"", "application/json", {}),
    ],
)
def test_a_body_is_held_as_json_text_or_base64_and_sent_back(
    data: bytes, content_type: str, held: dict[str, Any]
) -> None:
    assert inbound.body_fields(data, content_type) == held
    sent = inbound.body_bytes(inbound.body_fields(data, content_type))
    assert json.loads(sent) == json.loads(data) if "json" in held else sent == data


async def _no_lifespan(scope: Any, receive: Any, send: Any) -> None:
    """A plain ASGI app that serves HTTP only (it fails on a lifespan scope)."""
    assert scope["type"] == "http"
    message = await receive()
    answer = b"teapot:" + message.get("body", b"")
    await send({"type": "http.response.start", "status": 503, "headers": []})
    await send({"type": "http.response.body", "body": answer})


def replay_plain() -> int:
    return replay_request(_no_lifespan)


def test_an_app_without_a_lifespan_is_sent_the_request_alone(tmp_path: Path) -> None:
    store = tmp_path / "store"
    app = CaptureMiddleware(
        _no_lifespan,
        store=str(store),
        services="none",
        entrypoint=Entrypoint(kind="callable", target=f"{__name__}:replay_plain"),
    )

    async def post() -> int:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            return (await client.post("/tea", content=b"earl grey")).status_code

    assert asyncio.run(post()) == 503
    assert capture.flush(30)
    (manifest,) = DirectoryStore(store).list()
    assert _request_event(store, manifest.run_id)["text"] == "earl grey"
    report = replay(manifest.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()


AUTO_APP: Any = None
"""The captured app of the test below, at this module's top level as a service's is."""


def test_with_no_entrypoint_the_app_itself_replays_its_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given no entrypoint (as the README's one line adds it), the middleware records where
    a module holds its app; the replay sends the recorded request through that app, the
    middleware in it standing aside: the 503 reproduces with no divergence."""
    store = tmp_path / "store"
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    app = FastAPI(lifespan=_lifespan)
    app.add_middleware(CaptureMiddleware, store=str(store), services="none", keep="failed")

    @app.post("/orders")
    async def order(body: Order) -> Any:
        reserve(body.item, body.qty)
        if body.qty > 5:
            raise HTTPException(status_code=503)
        return {}

    monkeypatch.setattr(f"{__name__}.AUTO_APP", app)
    assert asyncio.run(_post(app, {"item": "pen", "qty": 8, "password": PASSWORD})) == 503
    assert capture.flush(30)
    (manifest,) = DirectoryStore(store).list()
    assert manifest.entrypoint is not None
    assert manifest.entrypoint.target == f"{__name__}:AUTO_APP"
    report = replay(manifest.run_id, store=store, times=2)
    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
    assert len(DirectoryStore(store).list()) == 3  # the replays' runs; the app kept no more


def test_an_app_no_module_holds_is_named_once_on_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    app = CaptureMiddleware(_no_lifespan, store=str(store), services="none")

    async def post() -> None:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            for _ in range(2):
                await client.post("/tea", content=b"x")

    asyncio.run(post())
    assert capture.flush(30)
    err = capfd.readouterr().err
    assert err.count("CaptureMiddleware cannot find its app") == 1
    assert all(
        m.entrypoint is None or m.entrypoint.kind == "command" for m in DirectoryStore(store).list()
    )


def test_an_imported_run_may_replay_through_the_projects_own_app_only(tmp_path: Path) -> None:
    """For an imported run, an app that captures, at the top level of a project module,
    may be sent the request; reached through a dotted name, or outside the project, not."""
    from sandbox.replay.isolation.trust import defined_in_project

    app = CaptureMiddleware(_no_lifespan)
    here = Path.cwd()
    assert defined_in_project(app, f"{__name__}:AUTO_APP", here) is None
    assert defined_in_project(app, f"{__name__}:holder.app", here) is not None
    assert defined_in_project(app, f"{__name__}:AUTO_APP", tmp_path) is not None
    assert defined_in_project(_no_lifespan, f"{__name__}:_no_lifespan", here) is None
    assert defined_in_project(FastAPI(), f"{__name__}:AUTO_APP", here) is not None
