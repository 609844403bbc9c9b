"""The lost update: two reservations run concurrently (threads ``worker-1`` and
``worker-2``) and both read the stock before either writes it back.

Each ``reserve`` reads the stock, asks the pricing service for a quote, writes the stock
back and records the reservation. ``worker-2`` first runs a fraud check (a slow query). In
production the pricing service is sometimes slow, so ``worker-2`` reads the stock while
``worker-1`` waits for its quote: one reservation's decrement is lost. On replay the quotes
come from the recording at once, so the race is gone unless the recorded order of the calls
is enforced.

``main`` is the agent as captured; ``main_fixed`` takes the stock in one atomic statement
(``UPDATE stock SET qty = qty - %s ... RETURNING qty``), so no decrement can be lost whatever
the order of the calls.

Services: ``DATABASE_URL`` (Postgres), ``PRICING_URL`` (its calls are recorded).
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import psycopg

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.snapshot.manifest import SQLInvariant

FRAUD_CHECK_SECONDS = 0.5
"""How long the fraud check's query takes: long enough that, without a slow quote, worker-1
has written the stock back before worker-2 reads it (even on a busy machine)."""
SYSTEM = "You reserve stock for customer orders. Reserve every order at once, in parallel."
USER = "Reserve 3 widgets for alice and 2 widgets for bob."
SCHEMA = """
CREATE TABLE IF NOT EXISTS stock (item text PRIMARY KEY, qty int NOT NULL, initial int NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (
    id serial PRIMARY KEY, customer text NOT NULL, item text NOT NULL, qty int NOT NULL
);
INSERT INTO stock VALUES ('widget', 10, 10) ON CONFLICT DO NOTHING;
"""
LOST_UPDATE = SQLInvariant(
    service="db",
    query=(
        "SELECT s.item, s.qty, s.initial FROM stock s WHERE s.qty + coalesce("
        "(SELECT sum(r.qty) FROM reservations r WHERE r.item = s.item), 0) <> s.initial"
    ),
)
TOOLS = [
    tool_spec(
        "reserve",
        "Reserve stock for a customer.",
        {"customer": {"type": "string"}, "item": {"type": "string"}, "qty": {"type": "integer"}},
    )
]


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    if last_tool_results(messages):
        return {"content": "Both reservations are done."}
    return {
        "tool_calls": [
            {"name": "reserve", "arguments": {"customer": "alice", "item": "widget", "qty": 3}},
            {"name": "reserve", "arguments": {"customer": "bob", "item": "widget", "qty": 2}},
        ]
    }


def _db() -> str:
    return os.environ["DATABASE_URL"]


@capture.tool
def fraud_check(customer: str) -> bool:
    with psycopg.connect(_db(), autocommit=True) as conn:
        conn.execute("SELECT pg_sleep(%s)", (FRAUD_CHECK_SECONDS,))
    return True


@capture.tool
def read_stock(item: str) -> int:
    with psycopg.connect(_db(), autocommit=True) as conn:
        row = conn.execute("SELECT qty FROM stock WHERE item = %s", (item,)).fetchone()
    assert row is not None
    return int(row[0])


@capture.tool
def write_stock(item: str, qty: int) -> None:
    with psycopg.connect(_db(), autocommit=True) as conn:
        conn.execute("UPDATE stock SET qty = %s WHERE item = %s", (qty, item))


@capture.tool
def take_stock(item: str, qty: int) -> int:
    """The fix: read-modify-write in one statement; returns the stock left."""
    with psycopg.connect(_db(), autocommit=True) as conn:
        row = conn.execute(
            "UPDATE stock SET qty = qty - %s WHERE item = %s RETURNING qty", (qty, item)
        ).fetchone()
    assert row is not None
    return int(row[0])


@capture.tool
def add_reservation(customer: str, item: str, qty: int) -> None:
    with psycopg.connect(_db(), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO reservations (customer, item, qty) VALUES (%s, %s, %s)",
            (customer, item, qty),
        )


def _quote(item: str, qty: int) -> float:
    url = os.environ.get("PRICING_URL", "http://127.0.0.1:8788")
    response = httpx.post(f"{url}/quote", json={"item": item, "qty": qty}, timeout=5.0)
    response.raise_for_status()
    return float(response.json()["price"])


@capture.tool
def reserve(customer: str, item: str, qty: int) -> dict[str, Any]:
    if customer != "alice":
        fraud_check(customer)
    stock = read_stock(item)
    price = _quote(item, qty)
    write_stock(item, stock - qty)
    add_reservation(customer, item, qty)
    return {"customer": customer, "reserved": qty, "price": price}


@capture.tool("reserve")
def reserve_fixed(customer: str, item: str, qty: int) -> dict[str, Any]:
    if customer != "alice":
        fraud_check(customer)
    price = _quote(item, qty)
    take_stock(item, qty)
    add_reservation(customer, item, qty)
    return {"customer": customer, "reserved": qty, "price": price}


def setup(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SCHEMA)


def _run(impl: Any) -> str:
    with scripted_model(script) as client:
        answer = agent_loop(client, SYSTEM, USER, TOOLS, {"reserve": impl}, concurrent=True)
    capture.result({"answer": answer})
    return answer


def main() -> str:
    """The agent as it ran in production (read the stock, then write it back)."""
    return _run(reserve)


def main_fixed() -> str:
    """The fix: the stock is decremented atomically in the database."""
    return _run(reserve_fixed)
