"""``ci-repro``'s check over a store, and the pytest plugin's fixtures and marker, with a fake
replayer (the real one needs containers)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from sandbox.errors import ReplayError, SandboxError
from sandbox.regress import check_store, expected_reproductions
from sandbox.replay.verdict import ReplayOutcome, Verdict, judge
from sandbox.snapshot import DirectoryStore, Manifest, Snapshot
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import ExceptionPredicate, Failure

pytest_plugins = ["pytester"]

PREDICATE = ExceptionPredicate(type="DuplicateOrder")


def save(store: DirectoryStore, run_id: str, **fields: object) -> None:
    manifest = Manifest(
        run_id=run_id, created=datetime(2024, 3, 1, 12, tzinfo=UTC), status="complete"
    )
    store.save(Snapshot(manifest.model_copy(update=fields)))


def verdict(reproduced: int, total: int) -> Verdict:
    bad = ReplayOutcome(error=ErrorInfo(type="DuplicateOrder", message="twice"))
    good = ReplayOutcome()
    return judge(PREDICATE, [bad] * reproduced + [good] * (total - reproduced))


@dataclass
class Report:
    verdict: Verdict
    mismatch: dict[str, object] | None = None


@pytest.fixture
def filled(store: DirectoryStore) -> DirectoryStore:
    failed = Failure(reason="duplicate order", predicate=PREDICATE)
    save(store, "a-still-fails", failure=failed)
    save(store, "b-lost", failure=failed)
    save(store, "c-broken", failure=failed)
    save(store, "d-ok-run")
    save(store, "e-replay", failure=failed, replay_of="a-still-fails")
    save(store, "f-unfinished", failure=failed, status="running")
    save(store, "g-not-observed", failure=failed.model_copy(update={"observed": False}))
    return store


def test_expected_reproductions_are_finished_failed_originals(filled: DirectoryStore) -> None:
    assert [m.run_id for m in expected_reproductions(filled)] == [
        "a-still-fails",
        "b-lost",
        "c-broken",
    ]


def test_check_reports_lost_reproductions_and_errors(filled: DirectoryStore) -> None:
    calls: list[tuple[str, int]] = []

    def replayer(run_id: str, *, store: DirectoryStore, times: int, **kw: object) -> Report:
        assert store is filled and kw == {"miss": "fail"}
        calls.append((run_id, times))
        if run_id == "c-broken":
            raise ReplayError("image missing")
        if run_id == "b-lost":
            return Report(verdict(0, times), {"message": "no recorded tool 'x'\n  request: {}"})
        return Report(verdict(2 if run_id == "a-still-fails" else 0, times))

    seen: list[str] = []
    report = check_store(
        filled, times=3, replayer=replayer, on_run=lambda m: seen.append(m.run_id), miss="fail"
    )
    assert calls == [("a-still-fails", 3), ("b-lost", 3), ("c-broken", 3)]
    assert seen == ["a-still-fails", "b-lost", "c-broken"]
    assert [(c.run_id, c.reproduced, c.total, c.ok) for c in report.checks] == [
        ("a-still-fails", 2, 3, True),
        ("b-lost", 0, 3, False),
        ("c-broken", 0, 3, False),
    ]
    assert report.checks[2].error == "image missing"
    assert report.checks[1].error == (
        "stopped by a request the recording cannot answer: no recorded tool 'x'"
    )
    assert [c.run_id for c in report.lost] == ["b-lost", "c-broken"]
    assert report.exit_code == 1
    assert report.to_json()["exit_code"] == 1


def test_check_passes_when_all_reproduce_and_limits_to_runs(filled: DirectoryStore) -> None:
    report = check_store(
        filled,
        runs=["a-still-fails"],
        replayer=lambda run_id, **kw: Report(verdict(1, 1)),
    )
    assert [c.run_id for c in report.checks] == ["a-still-fails"]
    assert report.exit_code == 0
    with pytest.raises(SandboxError, match="d-ok-run"):
        check_store(filled, runs=["d-ok-run"], replayer=lambda run_id, **kw: None)


def test_empty_store_passes(store: DirectoryStore) -> None:
    assert check_store(store, replayer=lambda run_id, **kw: None).exit_code == 0


PLUGIN_CONFTEST = """
import sandbox.replay.engine

CALLS = []


class Report:
    def __init__(self, run_id, times):
        self.run_id, self.times = run_id, times


def fake_replay(run_id, *, store, times=1, **options):
    CALLS.append((run_id, str(store.root), times, options))
    return Report(run_id, times)


sandbox.replay.engine.replay = fake_replay
"""


def test_plugin_fixture_and_marker(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(PLUGIN_CONFTEST)
    pytester.makepyfile(
        """
        import pytest
        from conftest import CALLS

        def test_fixture(replay, sandbox_store):
            report = replay("orders-1", times=2, miss="live")
            assert (report.run_id, report.times) == ("orders-1", 2)
            assert CALLS[-1] == ("orders-1", str(sandbox_store.root), 2, {"miss": "live"})
            assert sandbox_store.root.name == "elsewhere"

        @pytest.mark.replay("billing-7", times=3, clocks="frozen")
        def test_marker(replay_report):
            assert (replay_report.run_id, replay_report.times) == ("billing-7", 3)
            assert CALLS[-1][3] == {"clocks": "frozen"}

        def test_marker_missing(replay_report):
            pass
        """
    )
    result = pytester.runpytest("--sandbox-store", "elsewhere", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*replay_report needs @pytest.mark.replay*"])
