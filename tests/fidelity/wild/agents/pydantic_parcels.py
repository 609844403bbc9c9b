"""Parcel desk on pydantic-ai: the model asks two carriers for a rate at once (its sync tool
calls the carriers' HTTP API at CARRIER_URL with ``requests``; pydantic-ai runs the two
calls side by side, each on one of anyio's worker threads); the booking code then books
the cheapest rate."""

import asyncio
import os

import requests
from pydantic_ai import Agent


def rate(carrier: str, kilos: float) -> dict:
    """A carrier's price for a parcel, as a decimal string in euros."""
    answer = requests.post(
        f"{os.environ['CARRIER_URL']}/rate", json={"carrier": carrier, "kilos": kilos}, timeout=10
    )
    answer.raise_for_status()
    return answer.json()


agent = Agent(
    "openai-chat:scripted-1",
    instructions="You ship parcels. Ask every carrier for a rate before you answer.",
    tools=[rate],
)


def book(rates: list[dict]) -> dict:
    cheapest = min(rates, key=lambda r: r["price"])
    lowest = min(float(r["price"]) for r in rates)
    if float(cheapest["price"]) != lowest:
        raise ValueError(f"booked {cheapest['carrier']} at {cheapest['price']}, {lowest} offered")
    return cheapest


async def main() -> None:
    result = await agent.run("Ship a 4 kg parcel to Lyon.")
    rates = [
        part.content
        for message in result.all_messages()
        for part in message.parts
        if part.part_kind == "tool-return"
    ]
    print(book(rates))


if __name__ == "__main__":
    asyncio.run(main())
