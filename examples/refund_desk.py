"""The refund desk: three tool steps, and a refund paid on a payment that was never captured.

The agent looks the order up (``find_order``, Postgres), asks the payments service for the
payment's status (``payment_status``, over HTTP), and refunds when the payment is settled
(``issue_refund``, Postgres). In production the payments service answered ``settled`` for a
payment the ledger holds as only authorized (a stale cache): the refund went out, money that
was never taken was paid back. ``REFUND_OF_UNCAPTURED`` finds such a refund.

It is the agent ``sandbox replay --override`` is shown on: the second step's answer decides
whether the refund happens.

Services: ``DATABASE_URL`` (Postgres), ``PAYMENTS_URL`` (its calls are recorded).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import httpx
import psycopg

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.snapshot.manifest import SQLInvariant

SYSTEM = "You handle refund requests. Check the order and its payment before refunding."
USER = "Please refund my order 42."
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id int PRIMARY KEY, customer text NOT NULL, amount numeric NOT NULL, captured bool NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id serial PRIMARY KEY, order_id int NOT NULL REFERENCES orders (id), amount numeric NOT NULL
);
INSERT INTO orders VALUES (42, 'ACME', 30, false) ON CONFLICT DO NOTHING;
"""
REFUND_OF_UNCAPTURED = SQLInvariant(
    service="db",
    query="SELECT r.id FROM refunds r JOIN orders o ON o.id = r.order_id WHERE NOT o.captured",
)
PROPERTY = {"order_id": {"type": "integer"}}
TOOLS = [
    tool_spec("find_order", "Look an order up.", PROPERTY),
    tool_spec("payment_status", "The status of an order's payment.", PROPERTY),
    tool_spec(
        "issue_refund",
        "Refund an order.",
        {**PROPERTY, "amount": {"type": "number"}},
    ),
]


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model: order, then payment, then refund if the payment is settled."""
    done = [json.loads(result) for result in last_tool_results(messages)]
    called = [m for m in messages if m.get("role") == "assistant"]
    if not called:
        return {"tool_calls": [{"name": "find_order", "arguments": {"order_id": 42}}]}
    if len(called) == 1:
        return {"tool_calls": [{"name": "payment_status", "arguments": {"order_id": 42}}]}
    if len(called) == 2:
        status = done[-1].get("status") if done and isinstance(done[-1], dict) else None
        if status != "settled":
            return {"content": f"I cannot refund order 42 yet: its payment is {status}."}
        order = json.loads(messages[3]["content"])
        arguments = {"order_id": 42, "amount": float(order["amount"])}
        return {"tool_calls": [{"name": "issue_refund", "arguments": arguments}]}
    return {"content": f"Refunded: {done[-1]}"}


@capture.tool
def find_order(order_id: int) -> dict[str, Any]:
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        row = conn.execute(
            "SELECT id, customer, amount FROM orders WHERE id = %s", (order_id,)
        ).fetchone()
    if row is None:
        return {"error": f"no order {order_id}"}
    return {"id": row[0], "customer": row[1], "amount": str(row[2])}


@capture.tool
def payment_status(order_id: int) -> dict[str, Any]:
    response = httpx.post(f"{os.environ['PAYMENTS_URL']}/status", json={"order_id": order_id})
    response.raise_for_status()
    return dict(response.json())


@capture.tool
def issue_refund(order_id: int, amount: float) -> dict[str, Any]:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO refunds (order_id, amount) VALUES (%s, %s) RETURNING id",
            (order_id, amount),
        ).fetchone()
    assert row is not None
    return {"refund": row[0], "amount": amount}


def setup(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SCHEMA)  # type: ignore[arg-type]


def main() -> str:
    impls: dict[str, Callable[..., Any]] = {
        "find_order": find_order,
        "payment_status": payment_status,
        "issue_refund": issue_refund,
    }
    with scripted_model(script) as client:
        answer = agent_loop(client, SYSTEM, USER, TOOLS, impls)
    capture.result({"answer": answer})
    return answer
