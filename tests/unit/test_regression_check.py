"""``ci-repro``'s check over a store, and the pytest plugin's fixtures and marker, with a fake
replayer (the real one needs containers)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from sandbox.errors import ReplayError, SandboxError
from sandbox.regress import check_store, expected_reproductions
from sandbox.replay.judging.verdict import ReplayOutcome, Verdict, judge
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


def verdict(reproduced: int, total: int, *, stopped: bool = False) -> Verdict:
    bad = ReplayOutcome(error=ErrorInfo(type="DuplicateOrder", message="twice"))
    other = ReplayOutcome(mismatch="stopped at tool 'x': the recording has no answer")
    good = other if stopped else ReplayOutcome()
    return judge(PREDICATE, [bad] * reproduced + [good] * (total - reproduced))


@dataclass
class Report:
    verdict: Verdict


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
            return Report(verdict(0, times, stopped=True))
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
        "could not judge: recording mismatch: stopped at tool 'x': the recording has no answer"
    )
    assert [c.outcome for c in report.checks] == ["reproduced", "inconclusive", "inconclusive"]
    assert [c.run_id for c in report.lost] == ["b-lost", "c-broken"]
    assert report.exit_code == 2
    assert report.to_json()["exit_code"] == 2


def test_check_exit_code_is_the_verdicts_over_every_captured_failure(
    filled: DirectoryStore,
) -> None:
    """1 when every captured failure reproduced, 0 when one is gone, 2 when one could not be
    judged (whatever the others did)."""

    def replayer(reproduced: dict[str, int]) -> Any:
        return lambda run_id, **kw: Report(verdict(reproduced.get(run_id, 0), 2))

    everyone = check_store(
        filled, replayer=replayer(dict.fromkeys(["a-still-fails", "b-lost", "c-broken"], 1))
    )
    assert everyone.exit_code == 1 and everyone.lost == []
    one_gone = check_store(filled, replayer=replayer({"a-still-fails": 2, "c-broken": 1}))
    assert one_gone.exit_code == 0 and [c.run_id for c in one_gone.lost] == ["b-lost"]
    assert one_gone.checks[1].outcome == "gone" and one_gone.checks[1].error is None


def test_check_passes_when_all_reproduce_and_limits_to_runs(filled: DirectoryStore) -> None:
    report = check_store(
        filled,
        runs=["a-still-fails"],
        replayer=lambda run_id, **kw: Report(verdict(1, 1)),
    )
    assert [c.run_id for c in report.checks] == ["a-still-fails"]
    assert report.exit_code == 1
    with pytest.raises(SandboxError, match="d-ok-run"):
        check_store(filled, runs=["d-ok-run"], replayer=lambda run_id, **kw: None)


def test_empty_store_passes(store: DirectoryStore) -> None:
    assert check_store(store, replayer=lambda run_id, **kw: None).exit_code == 0


PLUGIN_CONFTEST = """
import sandbox.replay.engine
from sandbox.replay.judging.verdict import ReplayOutcome, judge
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import ExceptionPredicate

CALLS = []


class Report:
    def __init__(self, run_id, times):
        self.run_id, self.times = run_id, times
        error = ErrorInfo(type="KeyError", message="'PRICING_URL'")
        outcome = ReplayOutcome(error=error if run_id.startswith("crash") else None)
        self.verdict = judge(ExceptionPredicate(type="Duplicate"), [outcome] * times, environ={})

    def describe(self):
        return "described"


def fake_replay(run_id, plan, *, store):
    CALLS.append((run_id, str(store.root), plan))
    return Report(run_id, plan.times)


sandbox.replay.engine.replay = fake_replay
"""


def test_plugin_fixture_and_marker(pytester: pytest.Pytester) -> None:
    """The plugin's ``replay`` fixture and ``@pytest.mark.replay`` pass the run, the store
    and a plan of the times and options to the replayer, and fail on an inconclusive
    verdict."""
    pytester.makeconftest(PLUGIN_CONFTEST)
    pytester.makepyfile(
        """
        import pytest
        from conftest import CALLS

        def test_fixture(replay, sandbox_store):
            report = replay("orders-1", times=2, miss="live")
            assert (report.run_id, report.times) == ("orders-1", 2)
            run_id, root, plan = CALLS[-1]
            assert (run_id, root, plan.times, plan.miss) == (
                "orders-1", str(sandbox_store.root), 2, "live"
            )
            assert sandbox_store.root.name == "elsewhere"

        @pytest.mark.replay("billing-7", times=3, clocks="live")
        def test_marker(replay_report):
            assert (replay_report.run_id, replay_report.times) == ("billing-7", 3)
            assert (CALLS[-1][2].times, CALLS[-1][2].clocks) == (3, "live")

        def test_marker_missing(replay_report):
            pass

        def test_inconclusive_fails(replay):
            replay("crash-1", times=2)

        @pytest.mark.replay("crash-2")
        def test_inconclusive_marker_fails(replay_report):
            pass
        """
    )
    # In a subprocess: the fake replayer the conftest installs never reaches this process.
    result = pytester.runpytest_subprocess("--sandbox-store", "elsewhere", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, errors=2)  # a fixture that fails: an error
    result.stdout.fnmatch_lines(
        [
            "*replay_report needs @pytest.mark.replay*",
            "*replay of crash-2: could not judge*",
            "*replay of crash-1: could not judge: 0/2 runs reproduced (0 gone, 2 inconclusive: "
            "a different exception)*",
        ]
    )


def test_plugin_timeout_option_is_the_default_limit(pytester: pytest.Pytester) -> None:
    """``--sandbox-timeout`` reaches the replayer unless a test gives its own ``timeout``."""
    pytester.makeconftest(PLUGIN_CONFTEST)
    pytester.makepyfile(
        """
        from conftest import CALLS

        def test_limits(replay):
            replay("orders-1")
            assert CALLS[-1][2].timeout == 7.0
            replay("orders-1", timeout=2)
            assert CALLS[-1][2].timeout == 2
        """
    )
    result = pytester.runpytest_subprocess("--sandbox-timeout", "7", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
