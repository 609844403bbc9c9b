"""Refund desk: refunds are allowed for an hour after the order was placed."""

import os
from datetime import datetime

import httpx
from openai import OpenAI

client = OpenAI()


def get_order(order_id):
    resp = httpx.post(os.environ["ORDERS_URL"] + "/orders/get", json={"id": order_id})
    resp.raise_for_status()
    return resp.json()


def main():
    order = get_order("A-1001")
    created = datetime.fromisoformat(order["created_at"])  # the orders API speaks UTC
    age_min = (datetime.now() - created).total_seconds() / 60
    answer = client.chat.completions.create(
        model="scripted-1",
        messages=[
            {"role": "system", "content": "You decide refunds. Window: 60 minutes."},
            {
                "role": "user",
                "content": f"Now: {datetime.now():%Y-%m-%d %H}h. Order {order['id']} "
                f"is {age_min:.0f} minutes old. Refund?",
            },
        ],
    )
    if age_min < 0:
        raise ValueError(f"order {order['id']} is {-age_min:.0f} minutes in the future")
    print(answer.choices[0].message.content)


if __name__ == "__main__":
    main()
