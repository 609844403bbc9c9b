"""A variable read at start (``float(os.environ["DISCOUNT_PCT"])`` at import): the replay
restores it as recorded, with none of the agent's variables set; a redacted variable (the API
key) must be supplied, and without it the replay stops before running, naming it."""

from __future__ import annotations

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness


def pay(path: str, body: dict[str, object]) -> tuple[int, object]:
    amount = float(str(body["amount"]))
    if amount < 0:
        return 400, {"error": f"negative amount {amount}"}
    return 200, {"paid": amount}


def _capture(store: DirectoryStore) -> harness.Captured:
    with (
        harness.model(lambda messages: {"content": "Thanks for your order."}) as base,
        harness.service(pay, "payments") as url,
    ):
        env = harness.base_env(
            OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY, PAY_URL=url, DISCOUNT_PCT="150"
        )
        run = harness.capture(store, "discount_config", env)
    assert run.manifest.failure is not None, run.output
    assert "400 Bad Request" in run.manifest.failure.reason
    assert run.manifest.env["DISCOUNT_PCT"] == "150"
    assert run.manifest.env["OPENAI_API_KEY"].startswith("<redacted:")
    return run


def test_variable_read_at_start_is_restored(store: DirectoryStore) -> None:
    run = _capture(store)
    env = harness.base_env(OPENAI_API_KEY="sk-another-key-supplied-for-replay")
    assert "DISCOUNT_PCT" not in env and "PAY_URL" not in env

    result = harness.replay(store, run.run_id, env)

    harness.assert_reproduced_every_time(result)


def test_missing_redacted_variable_stops_before_running(store: DirectoryStore) -> None:
    run = _capture(store)
    before = set(store.runs_dir.iterdir())

    done = harness.run_cli(["replay", run.run_id, "--store", str(store.root)], harness.base_env())

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0], done.stderr
    assert set(store.runs_dir.iterdir()) == before  # nothing ran, no replay run was made
