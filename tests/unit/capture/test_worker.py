"""The background worker shared by the finisher of kept runs and the syncer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.capture import finisher
from sandbox.capture.worker import Worker
from sandbox.seam import boundary
from sandbox.snapshot.store import DirectoryStore


def test_items_are_handled_in_order_one_at_a_time_and_a_failure_does_not_stop_the_thread() -> None:
    """With no gathering each item is its own batch, in the order handed over; an error
    escaping the handler is passed over and the items after it are still handled."""
    seen: list[list[int]] = []

    def handle(batch: list[int]) -> None:
        seen.append(batch)
        if batch == [2]:
            raise RuntimeError("boom")

    worker: Worker[int] = Worker("test-worker", handle)
    worker.submit([1, 2, 3])
    assert worker.wait(30)
    assert seen == [[1], [2], [3]]
    assert worker.pending() == 0


def test_gathered_items_are_handled_in_one_batch_and_hurry_does_not_wait_out_the_delay() -> None:
    """With a long gathering delay, items queued together reach the handler as one batch;
    ``hurry`` returns once they are handled, long before the delay would end."""
    seen: list[list[str]] = []
    handled = threading.Event()

    def handle(batch: list[str]) -> None:
        seen.append(batch)
        handled.set()

    worker: Worker[str] = Worker("test-gather", handle, gather=3600.0)
    worker.submit(["a", "b", "c"])
    assert not worker.wait(0.05)  # still gathering
    assert worker.hurry(30)
    assert handled.is_set() and [item for batch in seen for item in batch] == ["a", "b", "c"]
    assert len(seen) == 1


def test_an_item_not_worth_gathering_is_handled_at_once() -> None:
    """With a long gathering delay, an item that ``gathers`` says is not worth the wait is
    handed over at once; one that is worth it waits for the delay (or :meth:`hurry`)."""
    seen: list[list[str]] = []

    worker: Worker[str] = Worker(
        "test-gathers", seen.append, gather=3600.0, gathers=lambda item: item.startswith("pin")
    )
    worker.submit(["plain"])
    assert worker.wait(30)
    assert seen == [["plain"]]
    worker.submit(["pinned", "plain again"])
    assert not worker.wait(0.05)  # gathering
    assert worker.hurry(30)
    assert seen == [["plain"], ["pinned", "plain again"]]


def test_the_finisher_counts_the_jobs_it_finished_and_the_cpu_it_spent_on_them() -> None:
    """:func:`finisher.spent` counts each finished job (one that raises too) and the CPU
    time of the finisher's thread while it ran them, not the time it waited."""

    def burn() -> None:
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass

    def idle() -> None:
        time.sleep(0.2)

    def fail() -> None:
        raise RuntimeError("boom")

    jobs, cpu = finisher.spent()
    for job in (burn, idle, fail):
        finisher.submit(job)
    assert finisher.wait(30)
    done, spent = finisher.spent()
    assert done - jobs == 3
    assert 0.05 <= spent - cpu < 0.15  # the burn, not the sleep


_HARD_EXIT = """
import os, sys, time
from sandbox.capture.worker import Worker

out = sys.argv[1]

def handle(batch):
    time.sleep(0.3)  # still handling when the process asks to end
    with open(out, "a") as f:
        f.write(f"{os.getpid()} {batch}\\n")

def waited():
    worker.hurry(30)

worker = Worker("test-exit", handle, gather=3600.0, at_exit=waited)
worker.submit(["kept"])
os._exit(3)
"""


def test_os_exit_waits_for_the_items_queued_and_keeps_its_status(tmp_path: Path) -> None:
    """A process ending with ``os._exit`` (as an RQ work horse does after each job) while an
    item waits on the thread (here to be gathered for an hour) ends once it is handled, with
    the status it asked for."""
    out = tmp_path / "handled.txt"
    script = tmp_path / "hard_exit.py"
    script.write_text(_HARD_EXIT)
    done = subprocess.run(
        [sys.executable, str(script), str(out)],
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
        timeout=60,
    )
    assert done.returncode == 3
    assert out.read_text().split()[1:] == ["['kept']"]


_SIGNAL_EXIT = """
import os, signal, sys, time
from sandbox.capture.worker import Worker

out, how = sys.argv[1], sys.argv[2]

def handle(batch):
    time.sleep(0.3)  # still handling when the process ends itself
    with open(out, "a") as f:
        f.write(f"{os.getpid()} {batch}\\n")

worker = Worker("test-signal", handle, gather=3600.0, at_exit=lambda: worker.hurry(30))
worker.submit(["kept"])
if how == "raise":  # as uvicorn ends after a graceful shutdown on SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.raise_signal(signal.SIGTERM)
else:
    os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)  # not reached: the signal ends the process
"""


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_signal_the_process_ends_itself_with_waits_for_the_items_queued(
    tmp_path: Path, how: str
) -> None:
    """A process that raises ``SIGTERM`` against itself with its default action (uvicorn
    does after a graceful shutdown, ``signal.raise_signal``; or ``os.kill`` of its own pid)
    while an item waits on the thread ends once it is handled, killed by the signal as it
    asked."""
    out = tmp_path / "handled.txt"
    script = tmp_path / "signal_exit.py"
    script.write_text(_SIGNAL_EXIT)
    done = subprocess.run(
        [sys.executable, str(script), str(out), how],
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
        timeout=60,
    )
    assert done.returncode == -signal.SIGTERM
    assert out.read_text().split()[1:] == ["['kept']"]


def test_a_forked_child_starts_with_none_of_the_parents_items(tmp_path: Path) -> None:
    """The parent's item, queued when it forks, is handled by the parent only; the child
    handles its own, and its ``os._exit`` waits for it."""
    out = tmp_path / "handled.txt"

    def handle(batch: list[str]) -> None:
        with open(out, "a") as f:
            f.write(f"{os.getpid()} {','.join(batch)}\n")

    worker: Worker[str] = Worker(
        "test-fork", handle, gather=3600.0, at_exit=lambda: worker.hurry(30)
    )
    worker.submit(["parent"])
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0 if worker.pending() == 0 else 1
        worker.submit(["child"])
        os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # the child had no item pending
    assert worker.hurry(30)
    lines = sorted(line.split() for line in out.read_text().splitlines())
    assert sorted(who for _, who in lines) == ["child", "parent"]
    assert dict((who, int(p)) for p, who in lines) == {"child": pid, "parent": os.getpid()}


def test_a_thread_started_inside_a_run_works_outside_it(store: DirectoryStore) -> None:
    """A worker first handed an item inside a run starts its thread outside the run's
    context: what the thread does is no run's."""
    seen: list[object] = []
    worker: Worker[int] = Worker("test-context", lambda batch: seen.append(boundary.current()))
    with capture.run("inside", store=store, services="none"):
        assert boundary.current() is not None
        worker.submit([1])
        assert worker.wait(30)
    assert seen == [None]
