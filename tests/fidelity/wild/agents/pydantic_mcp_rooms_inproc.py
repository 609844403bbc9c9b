"""Room bookings with the office's MCP server run in this process: pydantic-ai's
``MCPToolset`` handed the server object itself (``pydantic_mcp_rooms_server.server``), as a
test or a single-process deployment does."""

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_mcp_rooms import Booking, book
from pydantic_mcp_rooms_server import server

agent = Agent(
    "openai-chat:scripted-1",
    output_type=Booking,
    instructions="Book the room the team asks for; say how many people it seats.",
    toolsets=[MCPToolset(server)],
)

if __name__ == "__main__":
    book(agent.run_sync("Book Kyoto for our team of 10 tomorrow.").output)
