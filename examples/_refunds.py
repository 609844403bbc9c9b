"""The refund scenario the framework agents share: look order 7 up, then the refund window of
its country, then answer with the window. The bug is in the window tool: it still answers
with the 2023 policy (``30 days``); the fixed one answers ``14 days``."""

from __future__ import annotations

from typing import Any

from examples._model import last_tool_results

SYSTEM = "You help customers with returns. Look the order up, then its refund window."
USER = "Can I still return order 7?"
WINDOW_DOC = "How long a customer in ``country`` has to return an order."


def order(order_id: int) -> dict[str, Any]:
    return {"order_id": order_id, "status": "delivered", "country": "DE"}


def window_2023(country: str) -> str:
    return "30 days"  # the bug: the 2023 policy


def window_2024(country: str) -> str:
    return "14 days"


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model's side of the conversation."""
    done = last_tool_results(messages)
    asked = sum(1 for m in messages if m.get("role") == "tool")
    if asked == 0:
        return {"tool_calls": [{"name": "order_status", "arguments": {"order_id": 7}}]}
    if asked == 1:
        return {"tool_calls": [{"name": "refund_window", "arguments": {"country": "DE"}}]}
    return {"content": f"Yes: you can return order 7 within {done[-1].strip(chr(34))}."}
