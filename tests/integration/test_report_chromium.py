"""The report in a real browser: Debian's headless chromium runs the page's script, and the
DOM it dumps shows the verdict, the conversation, the highlighted divergent step and the
end-state table, for a reproduced, a gone and an inconclusive replay (real replays of the
engine, :mod:`report_runs`) and for a diff of two runs; a screenshot of each is taken.

Set ``REPORT_SCREENSHOTS=folder`` to keep the screenshots. Skipped without chromium, a
failure when CI=true."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.replay import ReplayReport
from sandbox.report import replay_comparison, write
from tests.unit.report_runs import Captured, capture_orders

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
]
SIZE = (1280, 3200)


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
        [chromium, *FLAGS, f"--window-size={SIZE[0]},{SIZE[1]}", f"--user-data-dir={profile}",
         *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    return capture_orders(tmp_path_factory.mktemp("orders"))


@pytest.fixture(scope="module")
def reports(captured: Captured) -> dict[str, ReplayReport]:
    return {e: captured.replay(e) for e in ("main_prechecked", "main_fixed", "main_broken")}


def _dom_and_screenshot(chromium: str, page: Path, name: str, tmp_path: Path) -> str:
    """The DOM after the page's script ran; the screenshot is checked and kept on request."""
    dom = _run(chromium, tmp_path / "profile-dom", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    png = tmp_path / f"{name}.png"
    shot = _run(chromium, tmp_path / "profile-png", f"--screenshot={png}", page.as_uri())
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == SIZE
    # a blank page compresses to a few kB; a drawn report with tables does not
    assert len(data) > 60_000, f"screenshot is suspiciously small ({len(data)} bytes)"
    keep = os.environ.get("REPORT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    return dom.stdout


def _text(fragment: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", fragment).split())


def _divergent_step(dom: str) -> str:
    """The text of the step the script marked as the first divergent one (it must be one)."""
    marked = re.findall(r'<div class="step k-\w+[^"]* divergent" id="step-[^"]+"', dom)
    assert len(marked) == 1, marked
    start = dom.index(marked[0])
    return _text(dom[start : start + 1500])


def _turns(dom: str) -> list[str]:
    """The conversation's messages as drawn: ``role: text``."""
    found = re.findall(
        r'<div class="msg role-(\w+)"><div class="role">[^<]*</div><div class="text">([^<]*)</div>',
        dom,
    )
    return [f"{role}: {text}" for role, text in found]


def _state_rows(dom: str) -> list[list[str]]:
    table = re.search(r'<table class="state rows">(.*?)</table>', dom, re.S)
    assert table is not None, "no end-state table of rows"
    return [
        [_text(cell) for cell in re.findall(r"<t[dh]>(.*?)</t[dh]>", row, re.S)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)
    ]


def _page(captured: Captured, report: ReplayReport, tmp_path: Path) -> Path:
    comparison, verdict = replay_comparison(captured.store, report)
    return write(tmp_path / "report.html", comparison, verdict)


CONVERSATION = [
    "system: You place orders for customers. Look the item up, then place the order.",
    "user: Please order 2 blue widgets for ACME. &lt;script&gt;alert('x')&lt;/script&gt;&amp;"
    '"&lt;img src=x onerror=alert(1)&gt;',
]


def test_reproduced_replay_in_chromium(
    chromium: str, captured: Captured, reports: dict[str, ReplayReport], tmp_path: Path
) -> None:
    report = reports["main_prechecked"]
    assert report.verdict.outcome == "reproduced", report.describe()
    dom = _dom_and_screenshot(chromium, _page(captured, report, tmp_path), "reproduced", tmp_path)
    verdict = re.search(r'<div class="verdict reproduced" id="verdict">(.*?)</div>', dom, re.S)
    assert verdict is not None and _text(verdict.group(1)) == "reproduced 1/1 reproduced"
    assert _turns(dom)[:2] == CONVERSATION
    assert "call #1 of tool 'find_order' in task 'main' was not in the original" in dom
    step = _divergent_step(dom)
    assert step.startswith("first divergent step (see the diff above) tool find_order")
    assert "No difference in the services' end states." in dom


def test_gone_replay_in_chromium(
    chromium: str, captured: Captured, reports: dict[str, ReplayReport], tmp_path: Path
) -> None:
    report = reports["main_fixed"]
    assert report.verdict.outcome == "gone", report.describe()
    dom = _dom_and_screenshot(chromium, _page(captured, report, tmp_path), "gone", tmp_path)
    verdict = re.search(r'<div class="verdict gone" id="verdict">(.*?)</div>', dom, re.S)
    assert verdict is not None and _text(verdict.group(1)) == "gone 0/1 reproduced"
    assert _turns(dom)[:2] == CONVERSATION
    assert _divergent_step(dom).startswith(
        "first divergent step (see the diff above) tool find_order"
    )
    assert _state_rows(dom) == [
        ["row", "change", "id", "item", "qty"],
        ["3", "missing from the replay", "3", "blue widget", "2"],
    ]


def test_inconclusive_replay_in_chromium(
    chromium: str, captured: Captured, reports: dict[str, ReplayReport], tmp_path: Path
) -> None:
    report = reports["main_broken"]
    assert report.verdict.outcome == "inconclusive", report.describe()
    dom = _dom_and_screenshot(chromium, _page(captured, report, tmp_path), "inconclusive", tmp_path)
    verdict = re.search(r'<div class="verdict inconclusive" id="verdict">(.*?)</div>', dom, re.S)
    assert verdict is not None
    assert _text(verdict.group(1)) == "inconclusive 0/1 reproduced a different exception"
    assert "KeyError: 'PRICING_URL'" in dom
    assert _turns(dom)[:2] == CONVERSATION
    step = _divergent_step(dom)
    assert step.startswith("first divergent step (see the diff above) tool place_order")
    assert "KeyError: 'PRICING_URL'" in step
    rows = _state_rows(dom)
    assert rows[0] == ["row", "change", "id", "item", "qty"]
    assert rows[1:] == [
        ["2", "missing from the replay", "2", "blue widget", "2"],
        ["3", "missing from the replay", "3", "blue widget", "2"],
    ]


def test_diff_of_two_runs_in_chromium(
    chromium: str, captured: Captured, reports: dict[str, ReplayReport], tmp_path: Path
) -> None:
    replayed, _ = replay_comparison(captured.store, reports["main_fixed"])
    assert replayed.after is not None
    diff = replace(replayed, labels=("run A", "run B"), notes=())  # two runs, no verdict
    page = write(tmp_path / "diff.html", diff)
    dom = _dom_and_screenshot(chromium, page, "diff", tmp_path)
    assert 'id="verdict"' not in dom
    heading = re.search(r"<h1>(.*?)</h1>", dom)
    assert heading is not None
    assert heading.group(1) == f"{replayed.before.run_id} vs {replayed.after.run_id}"
    assert _turns(dom)[:2] == CONVERSATION
    assert _divergent_step(dom).startswith(
        "first divergent step (see the diff above) tool find_order"
    )
    assert "expected (run A)" in dom and "actual (run B)" in dom
    assert _state_rows(dom)[1] == ["3", "missing from the replay", "3", "blue widget", "2"]
