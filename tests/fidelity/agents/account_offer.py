"""Account assistant: looks the customer up in the CRM and lets the model pick an offer."""

import json
import os

import httpx
from openai import OpenAI

from sandbox import capture

client = OpenAI()


@capture.tool
def lookup_customer(customer_id: str) -> dict:
    return httpx.post(os.environ["CRM_URL"] + "/customers/get", json={"id": customer_id}).json()


def main():
    customer = lookup_customer("C-42")
    reply = client.chat.completions.create(
        model="scripted-1",
        messages=[
            {"role": "system", "content": "Offer at most a 20% discount. Answer in JSON."},
            {"role": "user", "content": "Customer record: " + json.dumps(customer)},
        ],
    )
    offer = json.loads(reply.choices[0].message.content)
    if offer["discount"] > 20:
        raise ValueError(f"offered {offer['discount']}%, over the 20% limit")


if __name__ == "__main__":
    main()
