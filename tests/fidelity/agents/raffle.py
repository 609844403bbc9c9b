"""Raffle desk: the draw picks the winning entry and issues its ticket; the prize desk then
refuses the winner (there is no prize left). As it is imported, before ``capture.run``
opens, the script draws from the global ``random`` (a retry jitter) and makes a session id,
as libraries warming up do."""

import asyncio
import random
import uuid

from sandbox import capture

ENTRIES = [f"entry-{n}" for n in range(1000)]
JITTER = random.random()
SESSION = uuid.uuid4()


@capture.run("raffle", store="snapshots")
async def main() -> None:
    winner = random.choice(ENTRIES)
    ticket = uuid.uuid4()
    await asyncio.sleep(0)
    raise ValueError(f"no prize left for {winner} (ticket {ticket})")


if __name__ == "__main__":
    asyncio.run(main())
