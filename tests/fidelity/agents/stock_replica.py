"""Stock check before promising next-day delivery. Reads are spread over the primary and its
read replica to take load off the primary."""

import os
import random

import httpx
from openai import OpenAI

client = OpenAI()
rng = random.Random()
BACKENDS = ["primary", "replica"]


def stock(sku):
    backend = rng.choice(BACKENDS)
    return httpx.post(f"{os.environ['STOCK_URL']}/{backend}/stock", json={"sku": sku}).json()


def main():
    item = stock("SKU-7")
    if item["qty"] == 0:
        print("SKU-7 is sold out")
        return
    reply = client.chat.completions.create(
        model="scripted-1",
        messages=[{"role": "user", "content": f"SKU-7 stock: {item['qty']}. Promise delivery?"}],
    )
    print(reply.choices[0].message.content)
    order = httpx.post(os.environ["STOCK_URL"] + "/primary/order", json={"sku": "SKU-7"})
    order.raise_for_status()


if __name__ == "__main__":
    main()
