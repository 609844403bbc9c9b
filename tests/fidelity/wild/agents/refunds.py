"""Refund desk: an OpenAI Agents SDK assistant decides how much of an order to refund; the
payments code then issues it."""

import sqlite3

from agents import Agent, Runner, function_tool, set_tracing_disabled
from pydantic import BaseModel

DB = "shop.db"
set_tracing_disabled(True)


class Refund(BaseModel):
    order_id: int
    amount: float


@function_tool
def order(order_id: int) -> dict:
    """An order's total and what was refunded on it already."""
    with sqlite3.connect(DB) as conn:
        total, refunded = conn.execute(
            "SELECT total, refunded FROM orders WHERE id = ?", (order_id,)
        ).fetchone()
    return {"order_id": order_id, "total": total, "refunded": refunded}


agent = Agent(
    name="refunds",
    instructions="Refund damaged orders in full.",
    model="scripted-1",
    tools=[order],
    output_type=Refund,
)


def issue(refund: Refund) -> None:
    with sqlite3.connect(DB) as conn:
        total, refunded = conn.execute(
            "SELECT total, refunded FROM orders WHERE id = ?", (refund.order_id,)
        ).fetchone()
        if refunded + refund.amount > total:
            raise ValueError(
                f"refund of {refund.amount:.2f} on order {refund.order_id} exceeds what is "
                f"left to refund ({total - refunded:.2f})"
            )
        conn.execute(
            "UPDATE orders SET refunded = refunded + ? WHERE id = ?",
            (refund.amount, refund.order_id),
        )
    print(f"refunded {refund.amount:.2f} on order {refund.order_id}")


if __name__ == "__main__":
    issue(Runner.run_sync(agent, "Order 7 arrived broken, please refund it.").final_output)
