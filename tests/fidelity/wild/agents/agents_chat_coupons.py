"""Checkout: an OpenAI Agents SDK assistant on the chat completions API picks the coupon for
a basket; the checkout code then applies it. Coupons live in the shop's SQLite file."""

import asyncio
import sqlite3

from agents import Agent, Runner, function_tool, set_default_openai_api, set_tracing_disabled
from pydantic import BaseModel

DB = "coupons.db"
set_default_openai_api("chat_completions")
set_tracing_disabled(True)


class Basket(BaseModel):
    total: float
    coupon: str | None


@function_tool
def coupon(code: str) -> dict:
    """A coupon's discount (percent) and how many more times it can be used."""
    with sqlite3.connect(DB) as conn:
        percent, uses_left = conn.execute(
            "SELECT percent, uses_left FROM coupons WHERE code = ?", (code,)
        ).fetchone()
    return {"code": code, "percent": percent, "uses_left": uses_left}


agent = Agent(
    name="checkout",
    instructions="Apply the customer's coupon to their basket if it is valid.",
    model="scripted-1",
    tools=[coupon],
    output_type=Basket,
)


def pay(basket: Basket) -> None:
    if basket.coupon is not None:
        with sqlite3.connect(DB) as conn:
            (uses_left,) = conn.execute(
                "SELECT uses_left FROM coupons WHERE code = ?", (basket.coupon,)
            ).fetchone()
        if uses_left < 1:
            raise ValueError(f"coupon {basket.coupon} has no uses left")
    print(f"charged {basket.total:.2f}")


async def main() -> None:
    result = await Runner.run(agent, "My basket is 80.00, I have the coupon SPRING.")
    pay(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
