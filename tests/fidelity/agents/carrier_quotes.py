"""Shipping bot (asyncio): asks two carriers for a rate at once and books the cheaper one."""

import asyncio
import os

import httpx
from openai import AsyncOpenAI

client = AsyncOpenAI()
BUDGET = 10.0


async def quote(http, carrier):
    resp = await http.post(f"{os.environ['CARRIERS_URL']}/{carrier}/rate", json={"kg": 3})
    return carrier, resp.json()["price"]


async def main():
    async with httpx.AsyncClient() as http:
        quotes = await asyncio.gather(quote(http, "fastship"), quote(http, "slowpost"))
        carrier, price = min(quotes, key=lambda q: q[1])
        reply = await client.chat.completions.create(
            model="scripted-1",
            messages=[{"role": "user", "content": f"Book {carrier} at {price} EUR?"}],
        )
        print(reply.choices[0].message.content)
        if float(price) > BUDGET:
            raise RuntimeError(f"{carrier} at {price} EUR is over the {BUDGET} EUR budget")
        await http.post(f"{os.environ['CARRIERS_URL']}/{carrier}/book", json={"kg": 3})


if __name__ == "__main__":
    asyncio.run(main())
