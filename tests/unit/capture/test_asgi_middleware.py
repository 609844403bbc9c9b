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
from sandbox.capture.asgi import CaptureMiddleware, replay_request
from sandbox.replay import replay
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.events import FinalResult
from sandbox.snapshot.manifest import Entrypoint, MarkedPredicate, ResultPredicate


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
    assert manifest.failure.predicate == MarkedPredicate()  # judged on replay by a mark again
    assert manifest.labels["http.failed_status"] == str(failed_status)


def test_a_5xx_keeps_the_failure_the_app_marked_itself(tmp_path: Path) -> None:
    """An app that marks its run failed (its own reason and predicate) and then answers 503
    keeps its mark: the middleware marks only a run nothing marked, as ``replay_request``
    does on replay."""
    app = FastAPI()
    app.add_middleware(CaptureMiddleware, store=str(tmp_path), services="none")
    own = ResultPredicate(path="cents", op="lt", value=50)

    @app.get("/price")
    async def price() -> None:
        capture.mark_failed("stale price 20", own)
        raise HTTPException(status_code=503)

    assert asyncio.run(_call(app, ("GET", "/price"))) == [503]
    (manifest,) = DirectoryStore(tmp_path).list()
    assert manifest.failure is not None
    assert (manifest.failure.reason, manifest.failure.predicate) == ("stale price 20", own)


def test_a_request_records_its_status_as_its_result_unless_the_app_set_one(
    tmp_path: Path,
) -> None:
    """A request's result is ``{"status": N}`` of its answer; one whose handler recorded a
    result with ``capture.result`` keeps that one."""
    app = FastAPI()
    app.add_middleware(CaptureMiddleware, store=str(tmp_path), services="none")

    @app.get("/plain")
    async def plain() -> dict[str, int]:
        return {"n": 1}

    @app.get("/own")
    async def own() -> dict[str, int]:
        capture.result({"answer": 42})
        return {"n": 2}

    assert asyncio.run(_call(app, ("GET", "/plain"), ("GET", "/own"))) == [200, 200]
    capture.flush(30)
    store = DirectoryStore(tmp_path)
    results = {
        m.name: [e.value for e in store.load_events(m.run_id) if isinstance(e, FinalResult)]
        for m in store.list()
    }
    assert results == {"GET /plain": [{"status": 200}], "GET /own": [{"answer": 42}]}


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
        "http.failed_status": "500",
        "sandbox.opened": "capture.run",  # its replay records from where the run began
        "sandbox.naming": "origin",  # tasks numbered as created, pool work by submission
        "sandbox.opening": manifest.labels["sandbox.opening"],  # no other request was open
        "sandbox.opening.after_s": manifest.labels["sandbox.opening.after_s"],
    }
    assert manifest.labels["sandbox.opening"].isdigit()


def test_replay_request_outside_a_replay_is_one_clear_error() -> None:
    from sandbox.capture.asgi import replay_request
    from sandbox.errors import CaptureError

    with pytest.raises(CaptureError, match="no captured HTTP request"):
        replay_request(FastAPI())


def _replayable(store: Path | None, replay_with: str, **settings: object) -> FastAPI:
    """An app, captured into ``store`` when one is given, its runs replayed by calling
    ``replay_with`` of this module (which sends the request through the uncaptured app)."""
    app = FastAPI()
    if store is not None:
        app.add_middleware(
            CaptureMiddleware,
            store=str(store),
            services="none",
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:{replay_with}"),
            **settings,
        )
    return app


STOCK = {"fixed": False}
"""Whether the stock route is fixed (its bug: an empty shelf answered with a 503)."""


def stock_app(store: Path | None = None) -> FastAPI:
    """A route that fails with a 5xx (captured: ``store`` given) and one that marks its run
    failed without a predicate; both fixed by ``STOCK["fixed"]``."""
    app = _replayable(store, "replay_stock", keep="failed")

    @app.get("/stock/{item}")
    async def stock(item: str) -> dict[str, int]:
        shelf = refund(item)  # a recorded tool call: the replay must exercise it
        if not STOCK["fixed"]:
            raise HTTPException(status_code=503, detail=f"no shelf for {shelf['refunded']}")
        return {"count": 1}

    @app.get("/price/{item}")
    async def price(item: str) -> dict[str, int]:
        refund(item)
        cents = 100 if STOCK["fixed"] else 20
        if cents < 50:
            capture.mark_failed(f"stale price {cents} for {item}")
        return {"cents": cents}

    return app


REPLAY_STOCK = stock_app()
"""The app a replay sends the request through, uncaptured (the replay records)."""


def replay_stock() -> int:
    return replay_request(REPLAY_STOCK)


@pytest.mark.parametrize("path", ["/stock/s-1", "/price/p-1"])
def test_a_request_marked_failed_without_a_predicate_replays_to_a_verdict(
    tmp_path: Path, path: str
) -> None:
    """A kept 5xx (the middleware's mark) and a ``mark_failed`` with no predicate record
    :class:`MarkedPredicate`; replayed through the uncaptured app, the request reproduces
    while the bug is there and is gone once it is fixed (before, ``sandbox replay`` could not
    judge either: no predicate, no exception)."""
    store = tmp_path / "store"
    STOCK["fixed"] = False
    try:
        (status,) = asyncio.run(_call(stock_app(store), ("GET", path)))
        assert status == (503 if path.startswith("/stock") else 200)
        assert capture.flush(30)  # a kept run is finished in the background
        (manifest,) = DirectoryStore(store).list()
        assert manifest.failure is not None
        assert manifest.failure.predicate == MarkedPredicate()
        buggy = replay(manifest.run_id, store=store, times=2)
        assert buggy.verdict.reproduced == 2, buggy.describe()
        assert buggy.divergences == [None, None], buggy.describe()  # its result: its status
        STOCK["fixed"] = True
        fixed = replay(manifest.run_id, store=store, times=2)
        assert fixed.verdict.gone == 2, fixed.describe()
    finally:
        STOCK["fixed"] = False


LOOPS: list[asyncio.AbstractEventLoop] = []
"""The event loop each request to ``loop_app`` ran on."""
HANG = {"on": False}


def loop_app(store: Path | None = None) -> FastAPI:
    app = _replayable(store, "replay_loop")

    @app.get("/loop")
    async def loop() -> dict[str, int]:
        LOOPS.append(asyncio.get_running_loop())
        capture.mark_failed("seen")
        if HANG["on"]:
            await asyncio.sleep(60)
        return {"ok": 1}

    return app


REPLAY_LOOP = loop_app()


def replay_loop() -> int:
    return replay_request(REPLAY_LOOP)


def test_replayed_requests_run_on_one_event_loop_as_a_server_does(tmp_path: Path) -> None:
    """Every request replayed in a process runs on one event loop that stays open, so what
    the app made on it at the first (a ``redis.asyncio`` pool's connections) serves the next
    (a loop per request closed it under the next: ``Event loop is closed``)."""
    store = tmp_path / "store"
    asyncio.run(_call(loop_app(store), ("GET", "/loop")))
    (manifest,) = DirectoryStore(store).list()
    LOOPS.clear()
    report = replay(manifest.run_id, store=store, times=3)
    assert report.verdict.reproduced == 3, report.describe()
    assert len(LOOPS) == 3 and all(loop is LOOPS[0] for loop in LOOPS)
    assert LOOPS[0].is_running() and not LOOPS[0].is_closed()


def test_a_replayed_request_that_hangs_is_stopped_by_the_deadline(tmp_path: Path) -> None:
    """The replay waits for a request on the app's loop in short waits, so its deadline
    stops it (inconclusive: timeout) and cancels the request there."""
    import time

    store = tmp_path / "store"
    asyncio.run(_call(loop_app(store), ("GET", "/loop")))
    (manifest,) = DirectoryStore(store).list()
    HANG["on"] = True
    try:
        began = time.monotonic()
        report = replay(manifest.run_id, store=store, times=1, timeout=1)
        assert time.monotonic() - began < 20
    finally:
        HANG["on"] = False
    assert report.verdict.inconclusive == 1, report.describe()
    assert "timeout" in report.describe()
