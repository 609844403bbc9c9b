"""The duplicate order, captured from "production" and replayed in frozen containers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.replay import MISSING, replay
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DirectoryStore, str]]:
    from examples.capture_demo import capture_orders

    store = DirectoryStore(tmp_path_factory.mktemp("orders-store"))
    yield store, capture_orders(store)


def test_capture_saw_the_duplicate(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    manifest = store.load_manifest(run_id)
    assert manifest.failure is not None and manifest.failure.predicate is not None
    kinds = [e.kind for e in store.load_events(run_id)]
    assert "timeout" in kinds and kinds.count("retry") == 2


def test_replayed_20_times_reproduces_20(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    seen: list[int] = []
    report = replay(run_id, store=store, times=20, progress=lambda m, d, n: seen.append(d))
    assert report.verdict.reproduced == 20, report.describe()
    assert report.verdict.total == 20
    assert report.exit_code == 1
    assert len(report.replays) == 20
    assert max(seen) == 20
    assert all(d is None for d in report.divergences), report.describe()
    assert report.state_diffs == [[]] * 20, report.describe()  # the same end state
    replayed = store.load_manifest(report.replays[0])
    assert replayed.replay_of == run_id and replayed.status == "complete"


def test_fixed_agent_makes_the_failure_go_away(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    report = replay(run_id, store=store, times=20, entrypoint="examples.orders:main_fixed")
    assert report.mismatch is None, report.describe()
    assert report.verdict.reproduced == 0 and report.verdict.total == 20
    assert report.exit_code == 0
    assert any("the failure is gone" in note.lower() for note in report.notes), report.notes
    # The end state has one order fewer than the recorded (buggy) one: the duplicate row.
    assert len(report.state_diffs) == 20
    for run in report.state_diffs:
        missing = [d for d in run if d.service == "db" and d.status == "missing"]
        assert [d.path for d in missing] == ["tables.orders[1]"], run
        assert missing[0].expected["id"] == 2 and missing[0].actual is MISSING
        assert missing[0].expected["item"] == "blue widget" and missing[0].expected["qty"] == 2
    # the first order differs only by its idempotency key; the sequence advanced alike
    assert [(d.path, d.status) for d in report.state_diffs[0]] == [
        ("tables.orders[0].idem_key", "changed"),
        ("tables.orders[1]", "missing"),
    ], report.state_diffs[0]
    text = report.describe()
    assert "end state" in text and "missing: db: tables.orders[1]: removed" in text
    diff_json = report.to_json()["state_diffs"][0]
    assert {"service": "db", "path": "tables.orders[1]", "change": "removed"}.items() <= (
        diff_json[1].items()
    )
    assert "End state differs from the original's in: db." in report.notes


def test_prompt_change_stops_at_the_model_call(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    report = replay(run_id, store=store, times=3, entrypoint="examples.orders:main_reworded")
    assert report.mismatch is not None
    assert report.mismatch["kind"] == "llm"
    assert report.exit_code == 2
    assert len(report.replays) == 3  # every run is replayed and judged, each stops there
    assert [r.reason for r in report.verdict.runs] == ["mismatch"] * 3
    diff = report.mismatch["diff"]
    assert diff[0]["path"] == "messages[0].content"
    assert "Call place_order exactly once" in str(diff[0]["actual"])
    text = report.describe()
    assert "cannot answer" in text and "messages[0].content" in text
    events = store.load_events(report.replays[0])
    assert not any(e.kind == "tool" for e in events)  # it stopped before any tool ran
