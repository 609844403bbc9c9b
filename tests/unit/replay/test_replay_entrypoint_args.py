"""An entrypoint given to ``replay`` instead of a decorated task's recorded one: called with
the task's recorded arguments when its parameters take them (the fixed task itself), with
none when they do not (a function that supplies its own), also when its module can only be
imported inside the run (its parameters are read from its source); an imported run's
arguments are the bundle's data, and reach a named function only with ``trust``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replay_modules import written_module

from sandbox import capture
from sandbox.errors import UntrustedRunError
from sandbox.replay import replay
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.bundle import export_bundle, import_bundle

CALLED: list[tuple[str, int]] = []
"""The arguments each fixed task was called with."""


@capture.tool
def refund(order_id: str, cents: int) -> str:
    return f"refunded {cents} on {order_id}"


@capture.run("refund-job", services="none", keep="failed", packages=False)
def refund_job(order_id: str, cents: int) -> str:
    refund(order_id, cents)
    refund(order_id, cents)  # the bug: refunded twice
    raise RuntimeError(f"{order_id} refunded twice")


def refund_job_fixed(order_id: str, cents: int) -> str:
    CALLED.append((order_id, cents))
    return refund(order_id, cents)


def replay_fixed() -> str:
    """The fix for the one failing order, supplying its arguments itself."""
    return refund_job_fixed("o-7", 250)


@pytest.fixture
def failed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[DirectoryStore, str]:
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path / "store"))
    CALLED.clear()
    with pytest.raises(RuntimeError):
        refund_job("o-7", 250)
    capture.flush()
    store = DirectoryStore(tmp_path / "store")
    (kept,) = store.list()
    assert kept.entrypoint is not None and kept.entrypoint.args == ["o-7", 250]
    return store, kept.run_id


def _replayed_args(store: DirectoryStore, run_id: str) -> tuple[list[object], dict[str, object]]:
    entry = store.load_manifest(run_id).entrypoint
    assert entry is not None
    return entry.args, entry.kwargs


def test_an_entrypoint_taking_the_recorded_arguments_is_called_with_them(
    failed_run: tuple[DirectoryStore, str],
) -> None:
    store, run_id = failed_run
    report = replay(run_id, store=store, times=2, entrypoint=f"{__name__}:refund_job_fixed")
    assert CALLED == [("o-7", 250)] * 2
    assert report.verdict.outcome == "gone", report.describe()
    assert [_replayed_args(store, r) for r in report.replays] == [(["o-7", 250], {})] * 2


def test_an_entrypoint_taking_no_arguments_is_called_with_none(
    failed_run: tuple[DirectoryStore, str],
) -> None:
    store, run_id = failed_run
    report = replay(run_id, store=store, times=1, entrypoint=f"{__name__}:replay_fixed")
    assert CALLED == [("o-7", 250)]
    assert report.verdict.outcome == "gone", report.describe()
    assert _replayed_args(store, report.replays[0]) == ([], {})


def test_an_imported_runs_arguments_reach_a_named_entrypoint_only_trusted(
    failed_run: tuple[DirectoryStore, str], tmp_path: Path
) -> None:
    store, run_id = failed_run
    mine = DirectoryStore(tmp_path / "mine")
    import_bundle(mine, export_bundle(store, run_id, tmp_path / "ticket.tar.gz"))
    fixed = f"{__name__}:refund_job_fixed"
    with pytest.raises(UntrustedRunError, match=r"refund_job_fixed called with the arguments"):
        replay(run_id, store=mine, entrypoint=fixed)
    assert CALLED == []  # refused before anything ran
    # a function that supplies its own arguments is the user's code alone
    assert replay(run_id, store=mine, entrypoint=f"{__name__}:replay_fixed").verdict.outcome == (
        "gone"
    )
    assert replay(run_id, store=mine, entrypoint=fixed, trust=True).verdict.outcome == "gone"
    assert CALLED == [("o-7", 250)] * 2


LATE = f"""
import os
if "LATE_JOBS_READY" not in os.environ:  # read at import: set only inside the replay
    raise RuntimeError("LATE_JOBS_READY is not set")
from {__name__} import refund_job_fixed as _fixed


def refund_job_fixed(order_id, cents):
    return _fixed(order_id, cents)


def replay_fixed():
    return _fixed("o-7", 250)
"""


@pytest.fixture
def late_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of fixes that raises as it is imported before the replay sets its variable."""
    yield from written_module(tmp_path, monkeypatch, "late_jobs", LATE)


@pytest.mark.parametrize(
    ("function", "args"), [("refund_job_fixed", ["o-7", 250]), ("replay_fixed", [])]
)
def test_an_entrypoint_imported_only_in_the_run_gets_the_arguments_its_source_takes(
    failed_run: tuple[DirectoryStore, str], late_module: str, function: str, args: list[object]
) -> None:
    store, run_id = failed_run
    report = replay(
        run_id,
        store=store,
        times=2,
        entrypoint=f"{late_module}:{function}",
        env={"LATE_JOBS_READY": "1"},
    )
    assert CALLED == [("o-7", 250)] * 2
    assert report.verdict.outcome == "gone", report.describe()
    assert [_replayed_args(store, r) for r in report.replays] == [(args, {})] * 2


def test_an_imported_run_replays_with_a_late_function_that_supplies_its_own_arguments(
    failed_run: tuple[DirectoryStore, str], late_module: str, tmp_path: Path
) -> None:
    store, run_id = failed_run
    mine = DirectoryStore(tmp_path / "mine")
    import_bundle(mine, export_bundle(store, run_id, tmp_path / "ticket.tar.gz"))
    ready = {"LATE_JOBS_READY": "1"}
    with pytest.raises(UntrustedRunError, match=r"refund_job_fixed called with the arguments"):
        replay(run_id, store=mine, entrypoint=f"{late_module}:refund_job_fixed", env=ready)
    report = replay(run_id, store=mine, entrypoint=f"{late_module}:replay_fixed", env=ready)
    assert report.verdict.outcome == "gone", report.describe()
    assert CALLED == [("o-7", 250)]
