"""The lost update (order of concurrent calls) and the month-end split (frozen clocks)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from examples.billing import _month_end
from sandbox.replay import replay
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DirectoryStore]:
    yield DirectoryStore(tmp_path_factory.mktemp("demo-store"))


@pytest.fixture(scope="module")
def inventory_run(store: DirectoryStore) -> str:
    from examples.capture_demo import capture_inventory

    return capture_inventory(store)


@pytest.fixture(scope="module")
def billing_run(store: DirectoryStore) -> str:
    from examples.capture_demo import capture_billing

    return capture_billing(store)


def test_race_reproduces_every_time_with_the_recorded_order(
    store: DirectoryStore, inventory_run: str
) -> None:
    """20/20 with the recorded order enforced, and the turnstile never gave up on it."""
    report = replay(inventory_run, store=store, times=20)
    assert report.verdict.reproduced == 20, report.describe()
    assert report.stalls == 0, report.describe()
    assert report.to_json()["stalls"] == 0
    assert report.exit_code == 1


def test_race_never_reproduces_without_enforcement(
    store: DirectoryStore, inventory_run: str
) -> None:
    """Without the recorded order the recorded quotes come back at once and the lost update
    never happens: exactly 0 of 20, and each run diverges at worker-2's first call."""
    free = replay(inventory_run, store=store, times=20, enforce_order=False)
    assert free.verdict.reproduced == 0, free.describe()
    assert free.verdict.gone + free.verdict.inconclusive == 20
    diverged = [d for d in free.divergences if d is not None]
    assert diverged and diverged[0].stream[0] == "worker-2"


def test_month_end_reproduces_with_frozen_clocks(store: DirectoryStore, billing_run: str) -> None:
    manifest = store.load_manifest(billing_run)
    assert manifest.clock is not None and manifest.clock.start.day == 31
    report = replay(billing_run, store=store, times=3)
    assert report.verdict.reproduced == 3, report.describe()


def _bug_hour(now: datetime) -> bool:
    """The hour in which the month-end split is real with live clocks: the last day of a
    month, 23:00-23:59 UTC (Python's date says month end, SQL's now() + 1 hour is next month)."""
    return _month_end(now.date()) and now.hour == 23


def test_month_end_does_not_reproduce_with_live_clocks(
    store: DirectoryStore, billing_run: str
) -> None:
    """Live clocks give the failure exactly when the real clock is in the bug's hour (one
    hour a month); outside it, 0 of 3 replays reproduce."""
    # Off month end the tool answers differently, so the model's next request changes: with
    # miss=position the model still gets its recorded answer and the run can be judged.
    before = datetime.now(UTC)
    report = replay(billing_run, store=store, times=3, clocks="live", miss="position")
    after = datetime.now(UTC)
    if _bug_hour(before) != _bug_hour(after):
        pytest.skip("the live clock crossed the edge of the bug's hour during the replays")
    assert any("Clocks were live" in note for note in report.notes)
    if _bug_hour(before):
        assert report.verdict.reproduced == 3, report.describe()
        return
    assert report.verdict.reproduced == 0, report.describe()
    assert report.exit_code == 0
    stopped = replay(billing_run, store=store, times=1, clocks="live")
    assert stopped.mismatch is not None and stopped.exit_code == 2


def test_atomic_stock_update_makes_the_lost_update_go_away(
    store: DirectoryStore, inventory_run: str
) -> None:
    # The fix calls other tools (take_stock instead of read_stock + write_stock) but hands the
    # model the same results, so its recorded answers still fit: no mismatch.
    report = replay(inventory_run, store=store, times=3, entrypoint="examples.inventory:main_fixed")
    assert report.mismatch is None, report.describe()
    assert report.verdict.reproduced == 0 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 0


def test_one_clock_month_end_makes_the_wrong_period_go_away(
    store: DirectoryStore, billing_run: str
) -> None:
    # The fix files the invoice under January, so the tool result the model is handed (and
    # its next request) changes: miss "live" answers that call from the scripted model.
    report = replay(
        billing_run, store=store, times=3, entrypoint="examples.billing:main_fixed", miss="live"
    )
    assert report.mismatch is None, report.describe()
    assert report.verdict.reproduced == 0 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 0
