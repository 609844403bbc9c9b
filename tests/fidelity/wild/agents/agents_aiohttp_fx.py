"""Invoicing: an OpenAI Agents SDK assistant on the chat completions API converts an
invoice's total with its async tool, which asks the bank's FX API (at FX_URL, with the key
in FX_KEY) over aiohttp; the booking code then checks the converted total."""

import asyncio
import os

import aiohttp
from agents import Agent, Runner, function_tool, set_default_openai_api, set_tracing_disabled
from pydantic import BaseModel

set_default_openai_api("chat_completions")
set_tracing_disabled(True)


class Invoice(BaseModel):
    total_eur: float
    total_usd: float


@function_tool
async def fx_rate(base: str, quote: str) -> dict:
    """The rate that converts one unit of ``base`` into ``quote`` today."""
    headers = {"Authorization": f"Bearer {os.environ['FX_KEY']}"}
    url = f"{os.environ['FX_URL']}/rate"
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        session.post(url, json={"base": base, "quote": quote}) as answer,
    ):
        answer.raise_for_status()
        return await answer.json()


agent = Agent(
    name="invoicing",
    instructions="Convert the invoice total to USD with today's rate.",
    model="scripted-1",
    tools=[fx_rate],
    output_type=Invoice,
)


def book(invoice: Invoice) -> None:
    if invoice.total_usd < invoice.total_eur:
        raise ValueError(f"{invoice.total_eur} EUR booked as only {invoice.total_usd} USD")
    print(f"booked {invoice.total_usd:.2f} USD")


async def main() -> None:
    result = await Runner.run(agent, "Invoice 2291 is 250.00 EUR; book it in USD.")
    book(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
