"""Library returns desk: a LangGraph ReAct agent checks in the books members bring back; the
circulation code then settles the loan (25 cents a day late, into the fines ledger)."""

import math
import sqlite3
from datetime import datetime, timedelta

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

DB = "library.db"
FINE_CENTS = 25


@tool
def loan(book_id: int) -> dict:
    """Who has a book out, and the day it is due back (YYYY-MM-DD)."""
    with sqlite3.connect(DB) as conn:
        member, due = conn.execute(
            "SELECT member, due FROM loans WHERE book_id = ?", (book_id,)
        ).fetchone()
    return {"book_id": book_id, "member": member, "due": due}


@tool
def check_in(book_id: int) -> str:
    """Check a returned book in."""
    now = datetime.now().isoformat(timespec="seconds")
    with sqlite3.connect(DB) as conn:
        conn.execute("UPDATE loans SET returned_at = ? WHERE book_id = ?", (now, book_id))
    return f"book {book_id} checked in at {now}"


agent = create_react_agent(
    ChatOpenAI(model="scripted-1", temperature=0),
    [loan, check_in],
    prompt="You run the returns desk of a library. Check in the books members bring back.",
)


def settle(book_id: int) -> None:
    with sqlite3.connect(DB) as conn:
        member, due, returned_at = conn.execute(
            "SELECT member, due, returned_at FROM loans WHERE book_id = ?", (book_id,)
        ).fetchone()
        overdue = datetime.fromisoformat(returned_at) - datetime.fromisoformat(due)
        days = math.ceil(overdue / timedelta(days=1))  # a day begun counts
        if days > 0:
            conn.execute(
                "INSERT INTO fines VALUES (?, ?, ?, ?, ?)",
                (book_id, member, days * FINE_CENTS, due, returned_at[:10]),
            )
            print(f"{member} owes {days * FINE_CENTS} cents for book {book_id}")


if __name__ == "__main__":
    state = agent.invoke({"messages": [("user", "Ada is returning book 12.")]})
    print(state["messages"][-1].content)
    settle(12)
