"""Checkout assistant. Discounts come from the deployment's configuration."""

import os

import httpx
from openai import OpenAI

DISCOUNT_PCT = float(os.environ["DISCOUNT_PCT"])
client = OpenAI()


def main():
    price = 80.0 * (1 - DISCOUNT_PCT / 100)
    note = (
        client.chat.completions.create(
            model="scripted-1",
            messages=[
                {"role": "user", "content": f"Write a one-line receipt for {price:.2f} EUR."}
            ],
        )
        .choices[0]
        .message.content
    )
    resp = httpx.post(os.environ["PAY_URL"] + "/pay", json={"amount": price, "note": note})
    resp.raise_for_status()


if __name__ == "__main__":
    main()
