"""The returns desk as a service runs it: each return is awaited inside a ``capture.run`` of
its own (a failed one is kept in ``snapshots/``)."""

import asyncio
import sys

from langgraph_returns import agent, settle

from sandbox import capture


async def handle(book_id: int, member: str) -> None:
    with capture.run("returns", store="snapshots"):
        ask = f"{member} is returning book {book_id}."
        state = await agent.ainvoke({"messages": [("user", ask)]})
        print(state["messages"][-1].content)
        settle(book_id)


if __name__ == "__main__":
    asyncio.run(handle(int(sys.argv[1]), sys.argv[2]))
