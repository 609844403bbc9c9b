"""A run that writes its log as it goes (``keep="all"``) has its HTTP exchanges' events made
and written on the drain's thread (:mod:`sandbox.capture.drain`), with a real httpx client
against a local server: in the log they keep their places among the events written on the
agent's own thread; an error there is one warning and a damaged run, the agent's result
unchanged; a run with lines waiting on a busy drain waits before handing it more; the
thread works outside any run, and a forked child has none of its parent's lines."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox import capture
from sandbox.capture import drain
from sandbox.capture import http as capture_http
from sandbox.capture.run import DAMAGE_LABEL
from sandbox.snapshot.events import HTTPExchange, ToolCall
from sandbox.snapshot.store import DirectoryStore

ROOT = Path(__file__).resolve().parents[3]


@capture.tool
def step(n: int) -> int:
    return n * 10


def test_exchanges_are_made_on_the_drain_thread_in_their_places_among_tool_calls(
    store: DirectoryStore, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every exchange's fields are made on the thread ``sandbox-events``, none on the
    agent's; the log holds the exchanges and tool calls in the order they happened, line
    *n* the event with ``seq`` *n*."""
    made_on: list[str] = []
    original = capture_http.HTTPAdapter._exchange

    def observed(self: Any, emitter: Any) -> Any:
        made_on.append(threading.current_thread().name)
        return original(self, emitter)

    monkeypatch.setattr(capture_http.HTTPAdapter, "_exchange", observed)
    with capture.run("drained", store=store, services="none") as rec, httpx.Client() as client:
        for n in range(3):
            assert client.post(url, json={"n": n}).json()["echo"] == {"n": n}
            assert step(n) == n * 10
    assert made_on == ["sandbox-events"] * 3
    events = store.load_events(rec.run_id)
    assert [e.seq for e in events] == list(range(len(events)))
    crossings = [e for e in events if isinstance(e, HTTPExchange | ToolCall)]
    assert [type(e).__name__ for e in crossings] == ["HTTPExchange", "ToolCall"] * 3
    bodies = [e.request_body for e in crossings if isinstance(e, HTTPExchange)]
    assert bodies == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [e.output for e in crossings if isinstance(e, ToolCall)] == [0, 10, 20]


def test_a_full_disk_on_the_drain_thread_is_one_warning_and_a_damaged_run(
    full_disk: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exchange whose body (a blob) cannot be written on the drain's thread: the agent
    gets the whole response and goes on; the run is damaged, with one warning."""
    store = DirectoryStore(full_disk / "store")
    with capture.run("full", store=store, services="none") as rec, httpx.Client() as client:
        answer = client.post(f"{url}/big", json={"n": 1}).json()
        assert len(answer["padding"]) == 400_000
        assert step(2) == 20
    warnings = [line for line in capsys.readouterr().err.splitlines() if "capture of run" in line]
    assert len(warnings) == 1
    manifest = store.load_manifest(rec.run_id)
    assert manifest.status == "damaged"
    reason = manifest.labels[DAMAGE_LABEL]
    assert "No space left" in reason or "the disk is full" in reason


def test_a_run_with_lines_waiting_on_a_busy_drain_waits_before_handing_more(
    store: DirectoryStore, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the drain's thread held busy and a backlog of two lines allowed, the agent's
    third exchange returns only after the thread is let go: what waits in memory stays
    bounded. All three exchanges are in the log."""
    monkeypatch.setattr(drain, "LINES", 2)
    order: list[str] = []
    release = threading.Event()

    def busy(line: drain.Line) -> None:
        release.wait(30)
        order.append("drain let go")

    with capture.run("backlog", store=store, services="none") as rec, httpx.Client() as client:
        drain.put(busy, b"")

        def agent() -> None:
            for n in range(3):
                client.post(url, json={"n": n})
            order.append("third exchange returned")

        thread = threading.Thread(target=agent)
        thread.start()
        thread.join(0.5)
        release.set()
        thread.join(30)
    assert order == ["drain let go", "third exchange returned"]
    bodies = [e.request_body for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert bodies == [{"n": 0}, {"n": 1}, {"n": 2}]


_INSIDE = textwrap.dedent(
    """
    import sys
    from sandbox import capture
    from sandbox.capture import drain
    from sandbox.seam import boundary

    seen = []
    with capture.run("inside", store=sys.argv[1], services="none"):
        assert boundary.current() is not None
        drain.put(lambda line: seen.append(boundary.current()), b"")
        assert drain.settle(30)
    print(seen)
    """
)


def test_the_thread_started_inside_a_run_works_outside_it(tmp_path: Path) -> None:
    """In a fresh process the drain's thread starts inside a run (on its first line): what
    the thread does is no run's."""
    done = subprocess.run(
        [sys.executable, "-c", _INSIDE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[None]"


def test_a_forked_child_has_none_of_its_parents_lines() -> None:
    """A child forked while the parent's thread is busy with a line starts with no thread
    and no lines: waiting for its own returns at once, the parent's line is not written
    there (it stays the parent's)."""
    release = threading.Event()
    written: list[str] = []
    drain.put(lambda line: (release.wait(30), written.append("parent's line")), b"")
    pid = os.fork()
    if pid == 0:  # the child
        ok = drain.settle(5) and written == []
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    release.set()
    assert drain.settle(30)
    assert os.waitstatus_to_exitcode(status) == 0
    assert written == ["parent's line"]
