"""The HTML report in a real browser: Debian's headless chromium renders it, shows the
divergent step, and takes a screenshot. Skipped without chromium, a failure when CI=true."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from sandbox.replay.divergence import diff_states, first_divergence
from sandbox.replay.verdict import ReplayOutcome, judge
from sandbox.report import write_report
from sandbox.snapshot import Manifest, Snapshot
from sandbox.snapshot.events import ErrorInfo, Event, FinalResult, ToolCall
from sandbox.snapshot.manifest import ExceptionPredicate, Failure

pytestmark = pytest.mark.chromium

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]


@pytest.fixture(scope="module")
def chromium() -> str:
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("CI=true and the report test needs chromium: apt-get install -y chromium")
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    return path


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _events(retry_sku: str) -> list[Event]:
    return [
        ToolCall(seq=0, wall=1.0, mono=0.1, name="place_order", args={"sku": "A1"},
                 error=ErrorInfo(type="TimeoutError", message="read timed out")),
        ToolCall(seq=1, wall=1.1, mono=0.2, name="place_order", args={"sku": retry_sku},
                 attempt=2, output={"order": 2}),
        FinalResult(seq=2, wall=1.2, mono=0.3,
                    error=ErrorInfo(type="DuplicateOrder", message="order placed twice")),
    ]  # fmt: skip


@pytest.fixture
def page(tmp_path: Path) -> Path:
    from datetime import UTC, datetime

    def snap(run_id: str, events: list[Event]) -> Snapshot:
        manifest = Manifest(
            run_id=run_id,
            created=datetime(2024, 3, 1, 12, tzinfo=UTC),
            status="complete",
            failure=Failure(reason="duplicate <order> after a committed timeout"),
        )
        return Snapshot(manifest, events)

    original = snap("orders-1", _events("A1"))
    replayed = snap("orders-1-r1", _events("ZZ-divergent-sku"))
    div = first_divergence(original.events, replayed.events)
    assert div is not None

    class Report:
        replays = [replayed.run_id]
        verdict = judge(
            ExceptionPredicate(type="DuplicateOrder"),
            [ReplayOutcome.from_events(replayed.events, divergence=div)],
        )
        divergences = [div]
        state_diffs = diff_states({"db": {"orders": 1}}, {"db": {"orders": 2}})
        mismatch = None
        notes = ["clocks frozen at 2024-03-01T12:00:00Z"]

    return write_report(tmp_path / "report.html", original, replayed, Report())


def test_chromium_renders_the_divergent_step(chromium: str, page: Path, tmp_path: Path) -> None:
    dom = _run(chromium, tmp_path / "profile-dom", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "ZZ-divergent-sku" in html
    assert "call #2 of tool 'place_order' in task 'main' differs" in html
    assert 'id="divergent-1"' in html
    assert "reproduced 1/1" in html
    assert "duplicate &lt;order&gt; after a committed timeout" in html

    png = tmp_path / "report.png"
    shot = _run(chromium, tmp_path / "profile-png", f"--screenshot={png}", page.as_uri())
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1400, 1000)
    # a blank page compresses to a few kB; a rendered report with tables does not
    assert len(data) > 20_000, f"screenshot is suspiciously small ({len(data)} bytes)"
