"""Ticket triage: the model routes a ticket to a team. The model's name and the teams come
from the environment, read once when the script starts."""

import os

from openai import OpenAI

MODEL = os.environ["AGENT_MODEL"]
TEAMS = os.environ.get("TRIAGE_TEAMS", "billing,shipping").split(",")
client = OpenAI()


def route(ticket: str) -> str:
    answer = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": f"Route the ticket to one of: {', '.join(TEAMS)}."},
            {"role": "user", "content": ticket},
        ],
    )
    team = str(answer.choices[0].message.content).strip().lower()
    if team not in TEAMS:
        raise ValueError(f"the model routed the ticket to {team!r}, not a team")
    return team


def main() -> None:
    print(route("I was charged twice for order 7."))


if __name__ == "__main__":
    main()
