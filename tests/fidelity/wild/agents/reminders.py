"""Trial reminders: a pydantic-ai assistant books an e-mail reminder a few days before a
customer's free trial ends; the mailer then schedules it."""

import sqlite3
from datetime import date

from pydantic import BaseModel
from pydantic_ai import Agent

DB = "accounts.db"


class Reminder(BaseModel):
    account_id: int
    day: date


def trial_ends(account_id: int) -> str:
    """The day an account's free trial ends (YYYY-MM-DD)."""
    with sqlite3.connect(DB) as conn:
        row = conn.execute("SELECT trial_ends FROM accounts WHERE id = ?", (account_id,)).fetchone()
    return row[0]


agent = Agent(
    "openai-chat:scripted-1",
    output_type=Reminder,
    instructions="Book a reminder three days before the customer's trial ends.",
    tools=[trial_ends],
)


def schedule(reminder: Reminder) -> None:
    if reminder.day < date.today():
        raise ValueError(
            f"reminder for account {reminder.account_id} is in the past: {reminder.day}"
        )
    print(f"reminder for account {reminder.account_id} on {reminder.day}")


if __name__ == "__main__":
    schedule(agent.run_sync("Remind me before my trial of account 42 ends.").output)
