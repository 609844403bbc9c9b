"""Parcel desk: a LangGraph ReAct agent asks two carriers for a rate at once (its tools call
the carriers' HTTP API at CARRIER_URL with ``requests``; LangGraph runs the two sync tools
side by side on a thread pool); the booking code then books the cheapest rate."""

import asyncio
import json
import os

import requests
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


@tool
def rate(carrier: str, kilos: float) -> dict:
    """A carrier's price for a parcel, as a decimal string in euros."""
    answer = requests.post(
        f"{os.environ['CARRIER_URL']}/rate", json={"carrier": carrier, "kilos": kilos}, timeout=10
    )
    answer.raise_for_status()
    return answer.json()


agent = create_react_agent(
    ChatOpenAI(model="scripted-1", temperature=0),
    [rate],
    prompt="You ship parcels. Ask every carrier for a rate before you answer.",
)


def book(rates: list[dict]) -> dict:
    cheapest = min(rates, key=lambda r: r["price"])
    lowest = min(float(r["price"]) for r in rates)
    if float(cheapest["price"]) != lowest:
        raise ValueError(f"booked {cheapest['carrier']} at {cheapest['price']}, {lowest} offered")
    return cheapest


async def main() -> None:
    state = await agent.ainvoke({"messages": [("user", "Ship a 4 kg parcel to Lyon.")]})
    rates = [json.loads(m.content) for m in state["messages"] if m.type == "tool"]
    print(book(rates))


if __name__ == "__main__":
    asyncio.run(main())
