"""The two replay options ``explain`` releases conditions with, on their own: the recorded
timeouts not injected (``--no-inject-faults``) and a service brought up empty
(``--empty SERVICE``), on the committed orders run."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from sandbox.errors import UnknownNameError
from sandbox.replay import replay
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker
RUN = "demo-orders-duplicate"


@pytest.fixture
def store(committed_snapshots: Path) -> DirectoryStore:
    """What the repository ships, never the replays earlier commands left in snapshots/."""
    return DirectoryStore(committed_snapshots)


def test_without_the_recorded_timeout_the_duplicate_order_is_gone(store: DirectoryStore) -> None:
    report = replay(RUN, store=store, times=2, inject_faults=False)
    assert [r.outcome for r in report.verdict.runs] == ["gone", "gone"], report.describe()
    assert report.injected == []
    labels = store.load_manifest(report.replays[0]).labels
    assert labels["replay.faults"] == "not injected"


def test_an_empty_database_is_not_the_captured_one(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the captured schema the agent's insert fails: inconclusive, never gone."""
    code = main(["replay", RUN, "--store", str(store.root), "--empty", "db"])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "UndefinedTable" in out


def test_an_unknown_service_to_empty_names_the_run_s_services(store: DirectoryStore) -> None:
    with pytest.raises(UnknownNameError, match="db"):
        replay(RUN, store=store, empty=["dbx"])
