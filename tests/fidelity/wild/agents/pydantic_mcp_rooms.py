"""Room bookings: a pydantic-ai assistant books a meeting room, the rooms read from the
office's MCP server (``pydantic_mcp_rooms_server.py``, started over stdio by
``MCPToolset``); the calendar code then books it."""

from pathlib import Path

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset


class Booking(BaseModel):
    room: str
    people: int
    seats: int


rooms = MCPToolset(Path("pydantic_mcp_rooms_server.py"))
agent = Agent(
    "openai-chat:scripted-1",
    output_type=Booking,
    instructions="Book the room the team asks for; say how many people it seats.",
    toolsets=[rooms],
)


def book(booking: Booking) -> None:
    if booking.people > booking.seats:
        raise ValueError(
            f"room {booking.room} seats {booking.seats}, booked for {booking.people} people"
        )
    print(f"booked {booking.room} for {booking.people}")


def main() -> None:
    book(agent.run_sync("Book Kyoto for our team of 10 tomorrow.").output)


if __name__ == "__main__":
    main()
