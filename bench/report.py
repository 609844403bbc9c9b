"""The report page of a 10,000-event run in headless Chromium. Goal: DOMContentLoaded in
under 2 s.

The run: an agent of 400 conversations of 5 model turns (each model call with its HTTP
exchange, two tool calls in two worker threads, a clock read), 10,000 events in all. The page
is rendered by :func:`sandbox.report.render`, comparing the run with itself.

Baseline, in the same script: the same file with its script removed (the same bytes to read
and parse, nothing drawn), opened the same way. Chromium is driven over the DevTools protocol
(``--remote-debugging-port``, the ``websockets`` client); each side opens its page in a new
tab and reads ``domContentLoadedEventEnd`` of the navigation timing. The two sides alternate
after a warm-up; the medians, the ratio and its spread are printed. ``python -m bench.report``
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import statistics
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox.report import Comparison, render
from sandbox.snapshot import Manifest, Snapshot
from sandbox.snapshot.events import ClockRead, Event, HTTPExchange, LLMCall, ToolCall

EVENTS = 10_000
TURNS = 5
ROUNDS = 7
GOAL = 2.0
CHROMIUM = "/usr/bin/chromium"


def _conversation(first: int, n: int, t: float) -> tuple[list[Event], float]:
    """One conversation of ``TURNS`` model turns from seq ``first``: 25 events."""
    out: list[Event] = []
    messages: list[Any] = [
        {"role": "system", "content": "You answer support tickets; use the tools."},
        {"role": "user", "content": f"Ticket {n}: my order {n} arrived damaged, please help."},
    ]
    seq = first
    for turn in range(TURNS):
        calls = [
            {"id": f"c{n}-{turn}-{k}", "name": "lookup", "arguments": f'{{"order": {n + k}}}'}
            for k in range(2)
        ]
        response = {"text": None, "tool_calls": calls, "stop_reason": "tool_calls"}
        out.append(
            HTTPExchange(seq=seq, wall=t, mono=t + 0.2, span=seq, method="POST",
                         url="http://127.0.0.1:8000/v1/chat/completions", status=200,
                         request_body={"model": "m", "messages": list(messages)},
                         response_body={"choices": [{"message": {"role": "assistant"}}]},
                         duration=0.2)
        )  # fmt: skip
        out.append(
            LLMCall(seq=seq + 1, wall=t, mono=t + 0.2, parent_span=seq, name="m", model="m",
                    messages=list(messages), response=response, duration=0.2,
                    usage={"total_tokens": 120})
        )  # fmt: skip
        for k in range(2):
            out.append(
                ToolCall(seq=seq + 2 + k, wall=t, mono=t + 0.35, task=f"worker-{k + 1}",
                         name="lookup", args={"order": n + k}, started=t + 0.21,
                         output={"order": n + k, "status": "damaged in transit", "refund": 12.5},
                         duration=0.14)
            )  # fmt: skip
        out.append(ClockRead(seq=seq + 4, wall=t, mono=t + 0.36, value=1.7e9 + t))
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": "damaged in transit"}
            for c in calls
        )
        seq += 5
        t += 0.4
    return out, t


def build_run() -> Snapshot:
    events: list[Event] = []
    t = 0.0
    n = 0
    while len(events) < EVENTS:
        more, t = _conversation(len(events), n, t)
        events.extend(more)
        n += 1
    manifest = Manifest(
        run_id="support-10k", name="support", created=datetime(2024, 3, 1, tzinfo=UTC)
    )
    return Snapshot(manifest, events[:EVENTS])


async def _open(ws: Any, url: str, ids: list[int]) -> float:
    """Open ``url`` in a new tab; its DOMContentLoaded time in seconds."""

    async def call(method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        ids[0] += 1
        message: dict[str, Any] = {"id": ids[0], "method": method, "params": params}
        if session:
            message["sessionId"] = session
        await ws.send(json.dumps(message))
        while True:
            reply = json.loads(await ws.recv())
            if reply.get("id") == ids[0]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]  # type: ignore[no-any-return]

    target = (await call("Target.createTarget", url="about:blank"))["targetId"]
    session = (await call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
    await call("Page.enable", session)
    await call("Page.navigate", session, url=url)
    expression = (
        "new Promise(r => { const f = () => { const n = performance.getEntriesByType"
        "('navigation')[0]; n && n.domContentLoadedEventEnd > 0 ? r(n.domContentLoadedEventEnd)"
        " : setTimeout(f, 20); }; f(); })"
    )
    result = await call(
        "Runtime.evaluate", session, expression=expression, awaitPromise=True, returnByValue=True
    )
    await call("Target.closeTarget", targetId=target)
    return float(result["result"]["value"]) / 1000


async def measure(page: Path, static: Path, profile: Path) -> tuple[list[float], list[float]]:
    import websockets

    chromium = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if chromium is None:
        raise SystemExit("bench.report needs chromium (apt-get install -y chromium)")
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        while True:
            line = proc.stderr.readline()
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found or not line:
                break
        if not found:
            raise SystemExit("chromium did not open its DevTools endpoint")
        pages: list[float] = []
        statics: list[float] = []
        async with websockets.connect(found.group(1), max_size=None) as ws:
            ids = [0]
            await _open(ws, page.as_uri(), ids)  # warm-up
            await _open(ws, static.as_uri(), ids)
            for i in range(ROUNDS):
                sides = [(page, pages), (static, statics)]
                for path, out in sides if i % 2 == 0 else reversed(sides):
                    out.append(await _open(ws, path.as_uri(), ids))
        return pages, statics
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    run = build_run()
    html = render(Comparison(run, run, labels=("original", "replay")))
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html, encoding="utf-8")
        static = Path(tmp) / "static.html"
        static.write_text(re.sub(r"<script>.*?</script>", "", html, flags=re.S), encoding="utf-8")
        pages, statics = asyncio.run(measure(page, static, Path(tmp) / "profile"))
    ratios = [p / s for p, s in zip(pages, statics, strict=True)]
    median = statistics.median(pages)
    print(
        f"report of {len(run.events):,} events ({len(html) / 1e6:.1f} MB): DOMContentLoaded "
        f"median {median:.3f} s (goal < {GOAL:.0f} s: {'met' if median < GOAL else 'MISSED'}), "
        f"without its script {statistics.median(statics):.3f} s; ratio median "
        f"{statistics.median(ratios):.2f} (spread {min(ratios):.2f}-{max(ratios):.2f}), "
        f"{ROUNDS} rounds"
    )


if __name__ == "__main__":
    main()
