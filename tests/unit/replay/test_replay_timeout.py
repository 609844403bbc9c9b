"""A replayed agent that hangs is stopped at the wall-clock limit and its run counted
inconclusive ("timeout after N s"), in-process and as a recorded command (whose process
group is killed)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.conditions.deadline import default_timeout
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

SANDBOX = str(Path(sys.executable).with_name("sandbox"))


@capture.tool
def lookup(sku: str) -> int:
    return 2


def quick() -> dict[str, int]:
    return {"orders": lookup("A-1")}


def sleeps_forever() -> None:
    lookup("A-1")
    time.sleep(10**6)


def swallows_everything() -> None:
    """Catches whatever interrupts it, once, then blocks on a lock that is never released."""
    lookup("A-1")
    with contextlib.suppress(BaseException):
        threading.Event().wait()
    threading.Event().wait()


def busy_forever() -> None:
    lookup("A-1")
    while True:
        time.sleep(0.01)


def _capture(store: DirectoryStore) -> str:
    target = Entrypoint(kind="callable", target=f"{__name__}:quick")
    with capture.run("orders", store=store, seed=1, entrypoint=target, packages=False) as rec:
        rec.set_result(quick())
        rec.mark_failed("two orders", ResultPredicate(path="orders", op="gt", value=1))
    return rec.run_id


@pytest.mark.parametrize("agent", ["sleeps_forever", "swallows_everything"])
def test_a_hanging_agent_is_stopped_and_inconclusive(tmp_path: Path, agent: str) -> None:
    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    start = time.monotonic()
    report = replay(run_id, store=store, times=2, entrypoint=f"{__name__}:{agent}", timeout=0.5)
    elapsed = time.monotonic() - start
    assert elapsed < 8, elapsed  # two runs of 0.5 s (the swallower needs one more second)
    verdict = report.verdict
    assert (verdict.outcome, verdict.inconclusive, verdict.total) == ("inconclusive", 2, 2)
    assert report.exit_code == 2
    for run in verdict.runs:
        assert run.reason == "timeout"
        assert run.detail == "timeout after 0.5 s: the run was stopped unfinished"
    assert verdict.summary().endswith("(0 gone, 2 inconclusive: timeout); recorded calls made: 1/1")
    assert "Run 1: timeout after 0.5 s" in report.describe()
    for replayed in report.replays:  # each stopped run is sealed in the store
        assert store.load_manifest(replayed).status == "complete"
        assert [e.name for e in store.load_events(replayed) if isinstance(e, ToolCall)] == [
            "lookup"
        ]


def test_the_limit_holds_outside_the_main_thread(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    reports: list[object] = []
    target = f"{__name__}:busy_forever"
    worker = threading.Thread(
        target=lambda: reports.append(
            replay(run_id, store=store, entrypoint=target, timeout=0.5).verdict.runs[0].detail
        )
    )
    worker.start()
    worker.join(20)
    assert not worker.is_alive()
    assert reports == ["timeout after 0.5 s: the run was stopped unfinished"]


def test_a_run_within_its_limit_is_judged(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    report = replay(run_id, store=store, times=2, timeout=30)
    assert (report.verdict.outcome, report.verdict.reproduced) == ("reproduced", 2)


def test_default_limit_is_ten_times_the_recording_with_a_floor() -> None:
    def at(mono: float) -> ToolCall:
        return ToolCall(seq=0, task="main", name="t", wall=0.0, mono=mono, span=0)

    assert default_timeout([]) == 60.0
    assert default_timeout([at(0.5), at(3.0)]) == 60.0
    assert default_timeout([at(1.0), at(30.0)]) == 300.0


HANGING_SCRIPT = textwrap.dedent(
    """
    import os, subprocess, time
    from sandbox import capture

    @capture.tool
    def reserve(sku: str) -> int:
        return 2

    count = reserve("A-1")
    if os.path.exists("hang-now"):
        child = subprocess.Popen(["sleep", "1000000"])
        with open("child.pid", "w") as f:
            f.write(str(child.pid))
        time.sleep(10**6)
    raise SystemExit(3 if count > 1 else 0)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (killed, not yet reaped by its parent) is gone too
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def test_a_hanging_command_is_killed_with_its_children(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(HANGING_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    store = tmp_path / "snapshots"

    def sandbox(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SANDBOX, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    at = ("--store", str(store))
    captured = sandbox(
        "capture", *at, "--name", "hangs", "--fail-if", "exit!=0", "--", sys.executable, "agent.py"
    )
    assert captured.returncode == 3, captured.stderr
    (run_id,) = [p.name for p in (store / "runs").iterdir()]
    (tmp_path / "hang-now").touch()

    start = time.monotonic()
    # (the limit counts the interpreter starting too: generous on a loaded machine)
    replayed = sandbox("replay", run_id, *at, "--timeout", "10", "--json")
    assert time.monotonic() - start < 90
    assert replayed.returncode == 2, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    (run,) = report["verdict"]["runs"]
    assert (run["outcome"], run["reason"]) == ("inconclusive", "timeout")
    assert run["detail"] == "timeout after 10 s: the run was stopped unfinished"
    assert (tmp_path / "child.pid").exists(), replayed.stderr
    child = int((tmp_path / "child.pid").read_text())
    assert not _alive(child), "the agent's child process outlived the replay"


def test_replay_help_states_the_default() -> None:
    done = subprocess.run([SANDBOX, "replay", "--help"], capture_output=True, text=True)
    text = " ".join(done.stdout.split())
    assert "--timeout SECONDS" in text
    assert (
        "Default: 10x the recorded run's duration, at least 60 s (and twice what a script ran "
        "before the run's block)." in text
    )
