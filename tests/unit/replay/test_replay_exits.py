"""A function replayed in-process that calls ``os._exit`` does not end ``sandbox replay``
(whose exit code is the verdict: 1 would read "reproduced", 0 "gone"): the run is
inconclusive, in whichever thread it called it; a forked child still exits."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.isolation.exits import ProcessExit, exits_caught
from sandbox.snapshot import DirectoryStore


@capture.tool
def charge(order_id: str) -> str:
    return f"charged {order_id}"


@capture.run("charge-job", services="none", keep="failed", packages=False)
def charge_job(order_id: str) -> str:
    charge(order_id)
    raise RuntimeError(f"{order_id} charged but not confirmed")


def exits_quietly(order_id: str) -> str:
    """A fix gone wrong: the worker's fatal path ends the process, status 0."""
    charge(order_id)
    os._exit(0)


def exits_in_a_thread(order_id: str) -> str:
    charge(order_id)
    thread = threading.Thread(target=os._exit, args=(1,))
    thread.start()
    thread.join()
    return "confirmed"


@pytest.fixture
def failed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[DirectoryStore, str]:
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path / "store"))
    with pytest.raises(RuntimeError):
        charge_job("o-9")
    capture.flush()
    store = DirectoryStore(tmp_path / "store")
    (kept,) = store.list()
    return store, kept.run_id


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize(("function", "code"), [("exits_quietly", 0), ("exits_in_a_thread", 1)])
def test_an_agent_calling_os_exit_leaves_the_run_inconclusive(
    failed_run: tuple[DirectoryStore, str], function: str, code: int
) -> None:
    store, run_id = failed_run
    report = replay(run_id, store=store, times=1, entrypoint=f"{__name__}:{function}")
    (run,) = report.verdict.runs
    assert report.verdict.outcome == "inconclusive" and run.reason == "exit", report.describe()
    assert f"os._exit({code})" in run.detail


def test_a_forked_child_still_exits_as_it_asks() -> None:
    with exits_caught() as exits:
        pid = os.fork()
        if pid == 0:  # the child: its os._exit is the real one
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        with pytest.raises(ProcessExit):
            os._exit(3)
    assert os.waitstatus_to_exitcode(status) == 7
    assert exits.code == 3
