"""A retried attempt that timed out at capture, replayed with faults injected: when it timed
out in a crossing the recording answers (an HTTP call that hit its read timeout) and all it
did is answered from the recording, it runs again and times out there, as it did; when it
also made a live crossing (a tool, live by default), it is not run again and the crossings
it recorded stay its own, not the next attempt's. Either way the replay makes as many
attempts as the capture, the later attempts answered with their own recorded calls."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import tenacity

from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import HTTPExchange, RetryAttempt
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

SERVER = {"url": "", "slow": 1}
"""The payment server's address, and how many of its first answers come too late."""


class _Payments(BaseHTTPRequestHandler):
    served = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Payments.served += 1
        if _Payments.served <= SERVER["slow"]:
            time.sleep(0.5)  # past the client's read timeout
        body = json.dumps({"paid": _Payments.served}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client had given up
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def payments() -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Payments)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Payments.served = 0
    SERVER["url"] = f"http://127.0.0.1:{server.server_address[1]}/pay"
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def pay() -> dict[str, object]:
    """Pay through a retry whose attempts post to the payment server (0.2 s read timeout)."""

    def attempt() -> object:
        with httpx.Client(timeout=httpx.Timeout(5.0, read=0.2)) as client:
            return client.post(SERVER["url"], json={"order": "o-1"}).json()["paid"]

    return {"paid": _retrying("pay")(attempt)}


def _retrying(name: str) -> capture.Retrying:
    return capture.Retrying(
        name,
        stop=tenacity.stop_after_attempt(3),
        retry=tenacity.retry_if_exception_type((httpx.TimeoutException, TimeoutError)),
        reraise=True,
    )


SLOW = {"on": False}
"""Whether the first attempt of :func:`draw` is too slow (at capture only)."""


def draw() -> dict[str, object]:
    """Each attempt draws a token (a recorded ``os.urandom``); the first, at capture, then
    takes too long, a timeout from outside the recording."""
    attempts: list[str] = []

    def attempt() -> str:
        attempts.append(secrets.token_hex(4))
        if SLOW["on"] and len(attempts) == 1:
            raise TimeoutError("the vault took too long")
        return attempts[-1]

    token = _retrying("draw")(attempt)
    return {"token": token, "attempts": len(attempts)}


def _capture(store: DirectoryStore, agent: str, path: str) -> str:
    """Capture ``agent``, failed when its result's ``path`` is what it was."""
    entry = Entrypoint(kind="callable", target=f"{__name__}:{agent}")
    with capture.run(agent, store=store, seed=3, entrypoint=entry, packages=False) as rec:
        result = globals()[agent]()
        rec.set_result(result)
        rec.mark_failed("late", ResultPredicate(path=path, op="eq", value=result[path]))
    return rec.run_id


def _attempts(store: DirectoryStore, run_id: str) -> list[tuple[int | None, bool]]:
    return [
        (e.attempt, e.error is None)
        for e in store.load_events(run_id)
        if isinstance(e, RetryAttempt)
    ]


@pytest.mark.usefixtures("payments")
def test_an_attempt_that_timed_out_in_a_recorded_call_runs_again_to_that_timeout(
    tmp_path: Path,
) -> None:
    """Its HTTP call is answered with the recorded read timeout: two attempts, as at capture,
    the second answered with the second exchange, no divergence (before, the attempt was
    failed unrun and the next one was answered with its timeout: three attempts)."""
    store = DirectoryStore(tmp_path)
    run_id = _capture(store, "pay", "paid")
    assert _attempts(store, run_id) == [(1, False), (2, True)]

    report = replay(run_id, store=store, times=2)

    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
    for replayed in report.replays:
        assert _attempts(store, replayed) == [(1, False), (2, True)]
        exchanges = [e for e in store.load_events(replayed) if isinstance(e, HTTPExchange)]
        assert [e.attempt for e in exchanges] == [1, 2]


def test_an_attempt_that_timed_out_outside_the_recording_keeps_its_recorded_calls(
    tmp_path: Path,
) -> None:
    """The first attempt drew a token, then timed out on its own (nothing recorded timed
    out): it is failed as recorded without running, and its draw stays its own, so the
    second attempt draws the second token, as at capture (before, it was answered with the
    first attempt's draw: another token, and the failure read as gone)."""
    store = DirectoryStore(tmp_path)
    SLOW["on"] = True
    try:
        run_id = _capture(store, "draw", "token")
    finally:
        SLOW["on"] = False
    assert _attempts(store, run_id) == [(1, False), (2, True)]

    report = replay(run_id, store=store, times=2)

    assert report.verdict.reproduced == 2, report.describe()  # the same token
    for replayed in report.replays:
        assert _attempts(store, replayed) == [(1, False), (2, True)]
