"""Library returns desk on the catalogue's database over MCP: a LangGraph ReAct agent gets
its tools from PyPI's ``mcp-server-sqlite`` through langchain-mcp-adapters'
``MultiServerMCPClient``; the circulation code then settles the loan it read (25 cents a
day late, into the fines ledger)."""

import ast
import asyncio
import math
import os
import sqlite3
from datetime import datetime, timedelta

from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

DB = "library.db"
FINE_CENTS = 25
client = MultiServerMCPClient(
    {
        "library": {
            "command": os.environ.get("SQLITE_MCP", "mcp-server-sqlite"),
            "args": ["--db-path", DB],
            "transport": "stdio",
        }
    }
)


async def check_in(book_id: int) -> dict:
    agent = create_react_agent(
        ChatOpenAI(model="scripted-1", temperature=0),
        await client.get_tools(),
        prompt="You run the returns desk of a library. Look the loan up in the database.",
    )
    state = await agent.ainvoke({"messages": [("user", f"Ada is returning book {book_id}.")]})
    print(state["messages"][-1].content)
    (read,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    text = read.content if isinstance(read.content, str) else read.content[0]["text"]
    (loan,) = ast.literal_eval(text)
    return loan


def settle(book_id: int, loan: dict) -> None:
    returned_at = datetime.now()
    overdue = returned_at - datetime.fromisoformat(loan["due"])
    days = math.ceil(overdue / timedelta(days=1))  # a day begun counts
    if days > 0:
        with sqlite3.connect(DB) as conn:
            conn.execute(
                "INSERT INTO fines VALUES (?, ?, ?, ?, ?)",
                (book_id, loan["member"], days * FINE_CENTS, loan["due"], str(returned_at.date())),
            )
        print(f"{loan['member']} owes {days * FINE_CENTS} cents for book {book_id}")


def main() -> None:
    settle(12, asyncio.run(check_in(12)))


if __name__ == "__main__":
    main()
