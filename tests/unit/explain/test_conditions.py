"""The conditions a replay of the committed demo run holds, and how releasing them turns
into replay settings (no Docker)."""

from __future__ import annotations

from pathlib import Path

from sandbox.explain.conditions import conditions_of, release
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.store import DirectoryStore

SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots"
RUN = "demo-orders-duplicate"


def test_the_orders_run_holds_clock_faults_model_and_gateway() -> None:
    store = DirectoryStore(SNAPSHOTS)
    found = conditions_of(
        store.load_manifest(RUN), store.load_events(RUN), PolicySet(), {"db": ["table orders"]}
    )
    assert [c.key for c in found] == [
        "clock",
        "faults",
        "state:db:table orders",
        "llm:scripted-1",
        "http:http://127.0.0.1",
    ]
    faults = found[1]
    assert faults.held == (
        "the recorded timeouts and retries (retry:place_order attempt 1: httpx.ReadTimeout "
        "after its work committed)"
    )
    # the model's own HTTP exchanges are the model's condition, not a host's
    assert all(c.key != "http:http://127.0.0.1:38513" for c in found)


def test_tools_are_conditions_only_when_the_baseline_serves_them_recorded() -> None:
    store = DirectoryStore(SNAPSHOTS)
    manifest, events = store.load_manifest(RUN), store.load_events(RUN)
    plain = [c.key for c in conditions_of(manifest, events, PolicySet(), {})]
    recorded = PolicySet.from_pairs([("recorded", "tool:insert_order")])
    assert "tool:insert_order" not in plain
    assert "tool:insert_order" in [c.key for c in conditions_of(manifest, events, recorded, {})]


def test_released_conditions_become_replay_settings() -> None:
    settings = release(
        PolicySet(),
        ["clock", "faults", "order", "state:db:table orders", "llm:gpt-[4]", "http:http://h:8080"],
    )
    assert (settings.clocks, settings.enforce_order, settings.inject_faults) == (
        "live",
        False,
        False,
    )
    assert settings.parts == {"db": ("table orders",)}
    policies = settings.policies
    assert policies.policy_for("llm", "gpt-[4]").name == "live"
    assert policies.policy_for("llm", "gpt-4").name == "recorded"  # the glob is escaped
    assert policies.policy_for("http", "POST http://h:8080/charge").name == "live"
    assert policies.policy_for("http", "POST http://other/charge").name == "recorded"
    held = release(PolicySet(), [])
    assert (held.clocks, held.enforce_order, held.inject_faults, held.parts) == (
        "frozen",
        True,
        True,
        {},
    )
