"""A capture killed mid-run leaves every flushed event, and reads as incomplete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from sandbox import capture

    @capture.tool
    def step(n: int) -> int:
        return n

    with capture.run("doomed", store=sys.argv[1], seed=1, run_id="doomed-1", packages=False):
        for n in range(25):
            step(n)
        print("ready", flush=True)
        time.sleep(60)
    """
)


@pytest.mark.timeout(60)
def test_sigkill_leaves_a_loadable_incomplete_run(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "store")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(store.root)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    # A write cut by the kill would leave half a line: tolerated while the run is "running".
    with open(store.run_dir("doomed-1") / "events.jsonl", "ab") as f:
        f.write(b'{"kind":"tool","seq":26,"na')

    manifest = store.load_manifest("doomed-1")
    assert manifest.status == "running" and manifest.event_count is None
    assert manifest.pid == proc.pid
    with pytest.raises(ProcessLookupError):
        os.kill(proc.pid, 0)  # the capturing process is gone: the run is incomplete
    events = store.load_events("doomed-1")
    steps = [e for e in events if isinstance(e, ToolCall)]
    assert [e.output for e in steps] == list(range(25))
    assert [e.seq for e in events] == list(range(len(events)))
