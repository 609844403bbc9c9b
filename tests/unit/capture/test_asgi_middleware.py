"""The ASGI middleware: one captured run per HTTP request of a real FastAPI application,
named by its route, failed when the app raises, answers 5xx or marks the run failed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, HTTPException

from sandbox import capture
from sandbox.capture.asgi import CaptureMiddleware
from sandbox.snapshot import DirectoryStore


class RefundFailed(Exception):
    pass


@capture.tool
def refund(order_id: str) -> dict[str, str]:
    return {"refunded": order_id}


def service(store: Path, **settings: object) -> FastAPI:
    app = FastAPI()
    app.add_middleware(CaptureMiddleware, store=str(store), services="none", **settings)

    @app.post("/refunds/{order_id}")
    async def post_refund(order_id: str) -> dict[str, str]:
        await asyncio.sleep(0.01)
        done = refund(order_id)
        if order_id == "o-raise":
            raise RefundFailed(order_id)
        if order_id == "o-500":
            raise HTTPException(status_code=503, detail="gateway down")
        return done

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    return app


def _tools(store: DirectoryStore, run_id: str) -> list[object]:
    events = (store.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [json.loads(e)["args"] for e in events if json.loads(e).get("kind") == "tool"]


async def _call(app: FastAPI, *requests: tuple[str, str]) -> list[int]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
        answers = [await client.request(method, path) for method, path in requests]
    return [a.status_code for a in answers]


def test_each_request_is_a_run_named_by_its_route(tmp_path: Path) -> None:
    store = tmp_path / "store"
    codes = asyncio.run(
        _call(
            service(store),
            ("POST", "/refunds/o-1"),
            ("POST", "/refunds/o-raise"),
            ("POST", "/refunds/o-500"),
            ("GET", "/health"),
        )
    )
    assert codes == [200, 500, 503, 200]
    runs = {m.run_id: m for m in DirectoryStore(store).list()}
    assert sorted(m.name for m in runs.values()) == [
        "GET /health",
        "POST /refunds/{order_id}",
        "POST /refunds/{order_id}",
        "POST /refunds/{order_id}",
    ]
    by_order = {}
    for run_id, manifest in runs.items():
        tools = _tools(DirectoryStore(store), run_id)
        assert manifest.status == "complete"
        if tools:
            (args,) = tools
            by_order[args["order_id"]] = manifest  # type: ignore[index]
    assert by_order["o-1"].failure is None
    raised = by_order["o-raise"].failure
    assert raised is not None and raised.error is not None
    assert raised.error.type.endswith("RefundFailed")
    answered = by_order["o-500"].failure
    assert answered is not None and "HTTP 503" in answered.reason


def test_lifespan_passes_through_uncaptured(tmp_path: Path) -> None:
    store = tmp_path / "store"
    app = CaptureMiddleware(service(store), store=str(store))
    sent: list[dict[str, object]] = []
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, object]:
        return next(messages)

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    asyncio.run(app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send))  # type: ignore[arg-type]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert not (store / "runs").exists() or not list((store / "runs").iterdir())


@pytest.mark.parametrize("failed_status", [400])
def test_the_failing_status_is_a_setting(tmp_path: Path, failed_status: int) -> None:
    store = tmp_path / "store"

    app = FastAPI()
    app.add_middleware(
        CaptureMiddleware, store=str(store), services="none", failed_status=failed_status
    )

    @app.get("/missing")
    async def missing() -> None:
        raise HTTPException(status_code=404)

    assert asyncio.run(_call(app, ("GET", "/missing"))) == [404]
    (manifest,) = DirectoryStore(store).list()
    assert manifest.failure is not None and "HTTP 404" in manifest.failure.reason


def test_each_run_labels_its_request_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    app = FastAPI()
    app.add_middleware(CaptureMiddleware, store=str(store), services="none", labels={"t": "1"})

    @app.get("/orders/{order_id}")
    async def order(order_id: str) -> dict[str, str]:
        return {"id": order_id}

    assert asyncio.run(_call(app, ("GET", "/orders/o-7?full=1"))) == [200]
    (manifest,) = DirectoryStore(store).list()
    assert manifest.labels == {
        "t": "1",
        "http.method": "GET",
        "http.path": "/orders/o-7",
        "http.query": "full=1",
        "sandbox.opened": "capture.run",  # its replay records from where the run began
    }


def test_replay_request_outside_a_replay_is_one_clear_error() -> None:
    from sandbox.capture.asgi import replay_request
    from sandbox.errors import CaptureError

    with pytest.raises(CaptureError, match="no captured HTTP request"):
        replay_request(FastAPI())
