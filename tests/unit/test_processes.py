"""One liveness rule for a process id, for run listings and container sessions alike: a pid
that names no single process (0, negative, out of range) is not alive; a live process is,
unless the start time given is not its own (a reused pid)."""

from __future__ import annotations

import os
import subprocess
import sys

from sandbox.containers import labels
from sandbox.processes import pid_alive, process_start
from sandbox.snapshot import listing


def test_a_pid_naming_no_single_process_is_not_alive() -> None:
    for pid in (0, -1, -os.getpid(), 2**70):
        assert not pid_alive(pid), pid


def test_a_live_process_is_alive_unless_its_start_differs() -> None:
    me = os.getpid()
    assert pid_alive(me) and pid_alive(me, process_start(me))
    assert not pid_alive(me, "not-its-start")


def test_a_finished_process_is_not_alive() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert not pid_alive(int(done.stdout))


def test_listings_and_sessions_use_the_one_rule() -> None:
    assert listing.pid_alive is pid_alive
    assert labels.pid_alive is pid_alive
