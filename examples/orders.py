"""The duplicate order: a payment gateway times out after the order row committed, tenacity
retries the whole ``place_order`` attempt, and the order is inserted twice.

``main`` is the agent as captured; ``main_fixed`` passes an idempotency key so that the retry's
insert is a no-op (``ON CONFLICT DO NOTHING``); ``main_reworded`` changes the system prompt
(after capture, its model call no longer matches the recording).

Services: ``DATABASE_URL`` (Postgres), ``PAYMENTS_URL`` (the gateway; its calls are recorded).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import httpx
import psycopg
import tenacity

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.snapshot.manifest import SQLInvariant

SYSTEM = "You place orders for customers. Use place_order once, then confirm in one sentence."
REWORDED = "You place orders. Call place_order exactly once and then confirm briefly."
USER = "Please order 2 blue widgets for ACME."
GATEWAY_TIMEOUT = 0.3
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id serial PRIMARY KEY,
    item text NOT NULL,
    qty int NOT NULL,
    idem_key text UNIQUE
)
"""
DUPLICATES = SQLInvariant(
    service="db",
    query="SELECT item, qty, count(*) FROM orders GROUP BY item, qty HAVING count(*) > 1",
)
TOOLS = [
    tool_spec(
        "place_order",
        "Place an order and charge it.",
        {"item": {"type": "string"}, "qty": {"type": "integer"}},
    )
]


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    done = last_tool_results(messages)
    if done:
        return {"content": f"Your order is placed: {done[-1]}"}
    return {"tool_calls": [{"name": "place_order", "arguments": {"item": "blue widget", "qty": 2}}]}


def _db() -> str:
    return os.environ["DATABASE_URL"]


def _gateway() -> str:
    return os.environ.get("PAYMENTS_URL", "http://127.0.0.1:8787")


@capture.tool
def insert_order(item: str, qty: int, key: str | None = None) -> int:
    with psycopg.connect(_db(), autocommit=True) as conn:
        if key is None:
            row = conn.execute(
                "INSERT INTO orders (item, qty) VALUES (%s, %s) RETURNING id", (item, qty)
            ).fetchone()
        else:
            row = conn.execute(
                "INSERT INTO orders (item, qty, idem_key) VALUES (%s, %s, %s) "
                "ON CONFLICT (idem_key) DO NOTHING RETURNING id",
                (item, qty, key),
            ).fetchone()
            if row is None:
                row = conn.execute("SELECT id FROM orders WHERE idem_key = %s", (key,)).fetchone()
    assert row is not None
    return int(row[0])


def _charge(item: str, qty: int) -> str:
    response = httpx.post(
        f"{_gateway()}/charge", json={"item": item, "qty": qty}, timeout=GATEWAY_TIMEOUT
    )
    response.raise_for_status()
    return str(response.json()["status"])


def _place(item: str, qty: int, *, idempotent: bool) -> dict[str, Any]:
    key = str(uuid.uuid4()) if idempotent else None

    def attempt() -> dict[str, Any]:
        if idempotent:
            insert_order(item, qty, key)
        else:
            insert_order(item, qty)
        return {"order": f"{qty} x {item}", "payment": _charge(item, qty)}

    retrying = capture.Retrying(
        "place_order",
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_fixed(0.5),
        retry=tenacity.retry_if_exception_type(httpx.TimeoutException),
        reraise=True,
    )
    return retrying(attempt)


@capture.tool
def place_order(item: str, qty: int) -> dict[str, Any]:
    return _place(item, qty, idempotent=False)


@capture.tool("place_order")
def place_order_fixed(item: str, qty: int) -> dict[str, Any]:
    return _place(item, qty, idempotent=True)


def setup(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SCHEMA)


def _run(system: str, impl: Any) -> str:
    with scripted_model(script) as client:
        answer = agent_loop(client, system, USER, TOOLS, {"place_order": impl})
    capture.result({"answer": answer})
    return answer


def main() -> str:
    """The agent as it ran in production (no idempotency key)."""
    return _run(SYSTEM, place_order)


def main_fixed() -> str:
    """The fix: an idempotency key per order, so a retried insert is a no-op."""
    return _run(SYSTEM, place_order_fixed)


def main_reworded() -> str:
    """The same agent with its system prompt reworded after the capture."""
    return _run(REWORDED, place_order)
