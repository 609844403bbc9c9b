"""An asyncio agent (``AsyncOpenAI``, ``httpx.AsyncClient``, ``asyncio.gather``): prices come
as strings, ``min`` compares them as text and books the dearer carrier over budget."""

from __future__ import annotations

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness

PRICES = {"fastship": "9.50", "slowpost": "12.00"}


def carriers(path: str, body: dict[str, object]) -> tuple[int, object]:
    carrier, _, action = path.strip("/").partition("/")
    if action == "rate":
        return 200, {"carrier": carrier, "price": PRICES[carrier]}
    return 201, {"booked": carrier}


def test_async_agent_replays(store: DirectoryStore) -> None:
    with (
        harness.model(lambda messages: {"content": "Booked."}) as base,
        harness.service(carriers, "carriers") as url,
    ):
        env = harness.base_env(
            OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY, CARRIERS_URL=url
        )
        run = harness.capture(store, "carrier_quotes", env)
    assert run.manifest.failure is not None, run.output
    assert "slowpost at 12.00 EUR is over" in run.manifest.failure.reason

    result = harness.replay(store, run.run_id)

    harness.assert_reproduced_every_time(result)
