"""Naive local time under a non-UTC zone: the agent compares ``datetime.now()`` (local) with
the API's UTC times, so under ``TZ=America/New_York`` orders look five hours in the future.
The replay runs with no ``TZ`` at all and still sees New York time, frozen at the capture."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness


def orders(path: str, body: dict[str, object]) -> tuple[int, object]:
    now_utc = datetime.now(UTC).replace(tzinfo=None)
    return 200, {"id": body["id"], "created_at": now_utc.isoformat(), "total": 42}


def test_naive_local_time_replays_in_the_recorded_zone(store: DirectoryStore) -> None:
    with (
        harness.model(lambda messages: {"content": "No refund."}) as base,
        harness.service(orders, "orders") as orders_url,
    ):
        env = harness.base_env(
            OPENAI_BASE_URL=base,
            OPENAI_API_KEY=harness.API_KEY,
            ORDERS_URL=orders_url,
            TZ="America/New_York",
        )
        run = harness.capture(store, "refund_window", env)
    manifest = run.manifest
    assert run.exit_code == 1 and manifest.failure is not None, run.output
    assert "minutes in the future" in manifest.failure.reason
    assert manifest.clock is not None and manifest.clock.timezone == "America/New_York"
    local = manifest.clock.start.astimezone(ZoneInfo("America/New_York"))
    stamp = f"Now: {local:%Y-%m-%d %H}h."
    assert any(stamp in p for p in harness.prompts(run.events))

    result = harness.replay(store, run.run_id)  # no TZ, no ORDERS_URL, nothing listening

    harness.assert_reproduced_every_time(result)
    for events in harness.replayed_runs(store, result):
        assert any(stamp in p for p in harness.prompts(events))
