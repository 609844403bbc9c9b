"""A refund agent service (FastAPI over Postgres and Redis), captured in production with
``keep="failed"``: the runs kept are exactly the requests that paid a refund twice.

``POST /refunds/{order_id}``: an agent (the real ``openai`` client against one scripted
model server the process starts) calls the ``refund`` tool, which reads the order's amount
through a Redis cache (Postgres on a miss), inserts the refund row, then charges the payment
gateway (``PAYMENTS_URL``, 0.3 s timeout) and retries the whole attempt on a timeout. When
the gateway is slow for a request, the row has committed before the timeout: the retry
inserts it again. The request checks its own invariant (one refund per order) and marks its
run failed with it as a :class:`~sandbox.capture.SQLInvariant`; the client still gets 200.

Each run's entrypoint is :func:`replay`, which sends the recorded request through the app
again (:func:`sandbox.capture.asgi.replay_request`); :func:`replay_fixed` does it with the
fix, an idempotency key per order, so the retried insert is a no-op.

Run it: ``DATABASE_URL=... REDIS_URL=... PAYMENTS_URL=... uvicorn
examples.refund_service:app`` (``SNAPSHOTS``: the store, default ``snapshots``;
``CAPTURE=off``: no middleware).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import AsyncIterator, Collection, Iterator
from typing import Any

import httpx
import openai
import psycopg
import redis
import tenacity
from fastapi import FastAPI

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.capture.asgi import CaptureMiddleware, replay_request
from sandbox.snapshot.manifest import Entrypoint

SYSTEM = "You handle refunds. Call refund once for the order, then confirm in one sentence."
GATEWAY_TIMEOUT = 0.3
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, cents int NOT NULL);
CREATE TABLE IF NOT EXISTS refunds (
    id serial PRIMARY KEY,
    order_id text NOT NULL,
    cents int NOT NULL,
    idem_key text UNIQUE
);
"""
TOOLS = [tool_spec("refund", "Refund an order in full.", {"order_id": {"type": "string"}})]
_IDEMPOTENT: contextvars.ContextVar[bool] = contextvars.ContextVar("idempotent", default=False)
_model_url = "http://127.0.0.1:9/v1"
"""The scripted model's base URL (set when the app starts; on replay it is served from the
recording, whatever its port)."""


def duplicates(order_id: str) -> capture.SQLInvariant:
    """The bug's invariant for one order: the query returns rows while it is paid twice."""
    quoted = order_id.replace("'", "''")
    return capture.SQLInvariant(
        service="db",
        query=f"SELECT order_id, count(*) FROM refunds WHERE order_id = '{quoted}' "
        "GROUP BY order_id HAVING count(*) > 1",
    )


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    done = last_tool_results(messages)
    if done:
        return {"content": f"Refunded: {done[-1]}"}
    user = str(messages[-1].get("content", ""))
    order_id = user.rsplit(" ", 1)[-1]
    return {"tool_calls": [{"name": "refund", "arguments": {"order_id": order_id}}]}


def _cache() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REDIS_URL"])


def _amount(conn: psycopg.Connection[Any], order_id: str) -> int:
    cache = _cache()
    try:
        cached = cache.get(f"order:{order_id}:cents")
        if cached is not None:
            return int(cached)
        row = conn.execute("SELECT cents FROM orders WHERE id = %s", (order_id,)).fetchone()
        cents = int(row[0]) if row else 0
        cache.set(f"order:{order_id}:cents", cents)
        return cents
    finally:
        cache.close()


def _insert(order_id: str) -> int:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        cents = _amount(conn, order_id)
        if _IDEMPOTENT.get():
            conn.execute(
                "INSERT INTO refunds (order_id, cents, idem_key) VALUES (%s, %s, %s) "
                "ON CONFLICT (idem_key) DO NOTHING",
                (order_id, cents, f"refund:{order_id}"),
            )
        else:
            conn.execute("INSERT INTO refunds (order_id, cents) VALUES (%s, %s)", (order_id, cents))
    return cents


def _charge(order_id: str, cents: int) -> str:
    gateway = os.environ.get("PAYMENTS_URL", "http://127.0.0.1:8787")
    response = httpx.post(
        f"{gateway}/refund", json={"order": order_id, "cents": cents}, timeout=GATEWAY_TIMEOUT
    )
    response.raise_for_status()
    return str(response.json()["status"])


@capture.tool
def refund(order_id: str) -> dict[str, Any]:
    def attempt() -> dict[str, Any]:
        cents = _insert(order_id)
        return {"order": order_id, "cents": cents, "payment": _charge(order_id, cents)}

    retrying = capture.Retrying(
        "refund",
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_fixed(0.05),
        retry=tenacity.retry_if_exception_type(httpx.TimeoutException),
        reraise=True,
    )
    return retrying(attempt)


def _refunds(order_id: str) -> int:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM refunds WHERE order_id = %s", (order_id,))
        found = row.fetchone()
    return int(found[0]) if found else 0


_clients: dict[str, openai.OpenAI] = {}


def _client() -> openai.OpenAI:
    """The process's one client of the model server (made on first use)."""
    if _model_url not in _clients:
        _clients[_model_url] = openai.OpenAI(
            base_url=_model_url, api_key="sk-local-scripted-model", max_retries=0
        )
    return _clients[_model_url]


def handle(order_id: str) -> dict[str, Any]:
    """One request's agent: ask the model, run its refund call, check the invariant."""
    user = f"Please refund order {order_id}"
    answer = agent_loop(_client(), SYSTEM, user, TOOLS, {"refund": refund})
    capture.result({"answer": answer})
    if _refunds(order_id) > 1 and capture.active() is not None:
        capture.mark_failed(f"order {order_id} refunded twice", duplicates(order_id))
    return {"answer": answer}


def setup(database_url: str, orders: int) -> None:
    """The schema and ``orders`` orders ``o-1`` ... (``o-N`` costs N cents)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SCHEMA)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO orders (id, cents) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                [(f"o-{i}", i * 100) for i in range(1, orders + 1)],
            )


@contextlib.asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """One scripted model server for the process; every request's client points at it."""
    global _model_url
    with scripted_model(script) as client:
        _model_url = str(client.base_url).rstrip("/")
        yield


SERVICES = ("db", "cache")
"""The services the capture declares (Postgres, Redis), by name."""


def create_app(
    *, capture_on: bool = True, store: str | None = None, declare: Collection[str] = SERVICES
) -> FastAPI:
    """The service; with ``capture_on``, each request is a run kept only when it failed,
    with the services named in ``declare`` (all by default) declared."""
    app = FastAPI(lifespan=_lifespan)
    if capture_on:
        services = [
            capture.ServiceSpec("db", "postgres", os.environ["DATABASE_URL"], env="DATABASE_URL"),
            capture.ServiceSpec("cache", "redis", os.environ["REDIS_URL"], env="REDIS_URL"),
        ]
        app.add_middleware(
            CaptureMiddleware,
            store=store or os.environ.get("SNAPSHOTS", "snapshots"),
            keep="failed",
            services=[spec for spec in services if spec.name in declare],
            entrypoint=Entrypoint(
                kind="callable", target="examples.refund_service:replay", cwd=os.getcwd()
            ),
        )

    @app.post("/refunds/{order_id}")
    def post_refund(order_id: str) -> dict[str, Any]:
        return handle(order_id)

    return app


def _app() -> FastAPI:
    return create_app(capture_on=os.environ.get("CAPTURE", "on") != "off")


@contextlib.contextmanager
def _fixed() -> Iterator[None]:
    token = _IDEMPOTENT.set(True)
    try:
        yield
    finally:
        _IDEMPOTENT.reset(token)


REPLAY_APP = create_app(capture_on=False)
"""The app a replay sends the request through: made as the module is imported (before the
replay starts), uncaptured itself (the replay records)."""


def replay() -> str:
    """A captured request's entrypoint: the recorded request, through the app again."""
    return json.dumps({"status": replay_request(REPLAY_APP)})


def replay_fixed() -> str:
    """The fix: an idempotency key per order, so the retried insert is a no-op."""
    with _fixed():
        return replay()


if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
    app = _app()
