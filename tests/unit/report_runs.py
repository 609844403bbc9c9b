"""Real runs and real replay reports for the report tests: an orders agent, captured and
replayed by the engine (no Docker).

The agent looks up the catalogue (a retriever), asks a scripted model behind the real
``openai`` client, and runs the tool calls it gets in two worker threads. The model asks for
``place_order`` twice in one message; the tool inserts into a SQLite file each time, and the
agent then finds the duplicate and raises. ``main_fixed`` looks the order up first (a tool
call the original did not make; the failure is gone); ``main_broken``'s tool needs a setting
the replay does not have (the replay cannot be judged). Each replay is the engine's own
:class:`ReplayReport`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.replay import ReplayReport, replay
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

HOSTILE = "<script>alert('x')</script>&\"<img src=x onerror=alert(1)>"
SYSTEM = "You place orders for customers. Look the item up, then place the order."
USER = f"Please order 2 blue widgets for ACME. {HOSTILE}"
DB = {"path": ""}
_ONCE = threading.Lock()
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
    call = {"name": "place_order", "arguments": {"item": "blue widget", "qty": 2}}
    return {"tool_calls": [call, call]}  # the model asks twice: the bug's trigger


@capture.retriever
def catalogue(query: str) -> list[dict[str, Any]]:
    return [
        {"id": "sku-17", "content": "Blue widget, 2 cm, sold in packs of 2.", "score": 0.92},
        {"id": "sku-18", "content": "Blue widget XL, 4 cm.", "score": 0.41},
    ]


def _insert(item: str, qty: int) -> None:
    with sqlite3.connect(DB["path"]) as conn:
        conn.execute("INSERT INTO orders (item, qty) VALUES (?, ?)", (item, qty))
    conn.close()


@capture.tool
def place_order(item: str, qty: int) -> dict[str, Any]:
    _insert(item, qty)
    return {"status": "placed", "item": item, "qty": qty}


@capture.tool
def find_order(item: str, qty: int) -> int | None:
    with sqlite3.connect(DB["path"]) as conn:
        found = conn.execute(
            "SELECT id FROM orders WHERE item = ? AND qty = ?", (item, qty)
        ).fetchone()
    conn.close()
    return int(found[0]) if found else None


@capture.tool("place_order")
def place_order_once(item: str, qty: int) -> dict[str, Any]:
    with _ONCE:
        if find_order(item, qty) is None:
            _insert(item, qty)
    return {"status": "placed", "item": item, "qty": qty}


@capture.tool("place_order")
def place_order_priced(item: str, qty: int) -> dict[str, Any]:
    price = os.environ["PRICING_URL"]  # a KeyError when the setting is missing
    _insert(item, qty)
    return {"status": "placed", "item": item, "qty": qty, "price": price}


def _count() -> int:
    with sqlite3.connect(DB["path"]) as conn:
        (count,) = conn.execute("SELECT count(*) FROM orders WHERE item = 'blue widget'").fetchone()
    conn.close()
    return int(count)


def _run(tool: Any) -> str:
    # The first connection to the database is made here, before the worker threads: a found
    # SQLite file is captured at the first connection, and a second thread's insert must not
    # land in that restore point.
    before = _count()
    catalogue("blue widget")
    with scripted_model(script) as client:
        answer = agent_loop(client, SYSTEM, USER, TOOLS, {"place_order": tool}, concurrent=True)
    count = _count()
    if count > before + 1:
        raise RuntimeError(f"duplicate order: {count - before} rows for one request")
    return answer


def main() -> str:
    """The agent as captured: every tool call inserts."""
    return _run(place_order)


def main_fixed() -> str:
    """The fix: the insert is idempotent, the second call finds the first order."""
    return _run(place_order_once)


def main_prechecked() -> str:
    """An attempted fix: look for an earlier order once, before asking the model (the
    duplicate comes from the two calls of one answer, so the failure stays)."""
    if find_order("blue widget", 2) is not None:
        return "already ordered"
    return _run(place_order)


def main_broken() -> str:
    """A change whose tool needs a setting the replay's environment does not have."""
    return _run(place_order_priced)


@dataclass
class Captured:
    store: DirectoryStore
    run_id: str

    def replay(self, entry: str = "main", times: int = 1) -> ReplayReport:
        os.environ.pop("PRICING_URL", None)
        return replay(self.run_id, store=self.store, times=times, entrypoint=f"{__name__}:{entry}")


def capture_orders(folder: Path) -> Captured:
    """Capture the failing run into a store under ``folder``."""
    live = folder / "shop.db"
    with sqlite3.connect(live) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, qty INT)")
        conn.execute("INSERT INTO orders (item, qty) VALUES ('red widget', 1)")
    conn.close()
    DB["path"] = str(live)
    with scripted_model(script) as client:  # first use in the process, outside the capture
        client.chat.completions.create(model="scripted-1", messages=[])
    store = DirectoryStore(folder / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:main")
    with (
        pytest.raises(RuntimeError, match="duplicate order"),
        capture.run(
            "orders", store=store, services="auto", entrypoint=entry, packages=False
        ) as rec,
    ):
        main()
    return Captured(store, rec.run_id)
