"""Escalation bot: summarises the conversation and opens a ticket in the CRM."""

import os
import secrets

import httpx
from openai import OpenAI

client = OpenAI()


def main():
    summary = (
        client.chat.completions.create(
            model="scripted-1",
            messages=[{"role": "user", "content": "Summarise: customer wants a refund for #881."}],
        )
        .choices[0]
        .message.content
    )
    ref = secrets.token_hex(4)
    resp = httpx.post(os.environ["CRM_URL"] + "/tickets", json={"ref": ref, "summary": summary})
    resp.raise_for_status()
    print("ticket", ref)


if __name__ == "__main__":
    main()
