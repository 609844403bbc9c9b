"""A replay as one self-contained HTML page: verdict, timelines side by side, divergence.

The page has inline CSS and no scripts or external assets, so it can be attached to a ticket
and opened anywhere. Every value that comes from a snapshot (event content, names, notes,
diffs) is untrusted and goes through :func:`html.escape`; nothing is ever inserted raw.

::

    page = render_report(original, replayed, report)
    write_report("out.html", original, replayed, report)

``report`` is a :class:`ReplayReport` of :func:`sandbox.replay.engine.replay`, or anything with the
same read-only attributes (:class:`ReportLike`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any, Protocol

from sandbox.replay.divergence import Divergence, EventSummary, StateDiff
from sandbox.replay.jsondiff import MISSING, FieldDiff, short
from sandbox.replay.verdict import Verdict
from sandbox.snapshot.events import Event
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.store import DirectoryStore, atomic_write

SUMMARY_WIDTH = 90
"""Characters of request and response shown per timeline row."""
DETAIL_WIDTH = 400
"""Characters of each side shown for the divergent step and for diffs."""
MAX_ROWS = 2000
"""Timeline rows shown per side; longer logs are cut, and the page says so."""


class ReportLike(Protocol):
    """What the page reads from a replay report."""

    @property
    def original(self) -> str: ...
    @property
    def verdict(self) -> Verdict: ...
    @property
    def divergences(self) -> Sequence[Divergence | None]: ...
    @property
    def replays(self) -> Sequence[str]: ...
    @property
    def notes(self) -> Sequence[str]: ...
    @property
    def state_diffs(self) -> object: ...
    @property
    def mismatch(self) -> object: ...


def e(value: object) -> str:
    """Escaped text of any value (quotes included)."""
    return escape(str(value), quote=True)


def _cut(value: Any, width: int) -> str:
    return short(value, width)


# --- pieces ---------------------------------------------------------------------------------


BADGES = {"reproduced": "reproduced", "gone": "gone", "inconclusive": "could not judge"}
"""The verdict badge: red, green, or amber (with the reasons) when a run could not be judged."""


def _verdict_block(verdict: Verdict) -> str:
    outcome = verdict.outcome
    why = f": {', '.join(verdict.reasons)}" if outcome == "inconclusive" else ""
    runs = "".join(
        f"<tr class='{r.outcome}'><td>{r.run + 1}</td>"
        f"<td>{e(r.label)}</td><td>{e(r.detail)}</td></tr>"
        for r in verdict.runs
    )
    predicate = _cut(verdict.predicate.model_dump(mode="json"), DETAIL_WIDTH)
    return (
        f"<div class='verdict {outcome}' id='verdict'>{e(BADGES[outcome] + why)} "
        f"{verdict.reproduced}/{verdict.total}</div>"
        f"<p class='counts'>{verdict.reproduced} reproduced, {verdict.gone} gone, "
        f"{verdict.inconclusive} could not be judged</p>"
        f"<p class='predicate'>failure predicate: <code>{e(predicate)}</code></p>"
        + (
            "<table class='runs'><thead><tr><th>run</th><th>outcome</th><th>detail</th>"
            f"</tr></thead><tbody>{runs}</tbody></table>"
            if runs
            else ""
        )
    )


def _event_row(event: Event, highlight: bool) -> str:
    summary = EventSummary.of(event)
    attempt = f" (attempt {summary.attempt})" if summary.attempt else ""
    text = f"{_cut(summary.request, SUMMARY_WIDTH)} → {_cut(summary.response, SUMMARY_WIDTH)}"
    row_attrs = f" class='divergent' id='divergent-{event.seq}'" if highlight else ""
    return (
        f"<tr{row_attrs}><td>{event.seq}</td><td>{e(event.task)}</td>"
        f"<td><span class='kind k-{e(event.kind)}'>{e(event.kind)}</span></td>"
        f"<td>{e(event.name)}{e(attempt)}</td><td class='summary'>{e(text)}</td></tr>"
    )


def _timeline(title: str, run_id: str, events: Sequence[Event], mark: int | None) -> str:
    rows = "".join(_event_row(ev, ev.seq == mark) for ev in events[:MAX_ROWS])
    more = (
        f"<p class='note'>{len(events) - MAX_ROWS} more events not shown</p>"
        if len(events) > MAX_ROWS
        else ""
    )
    return (
        f"<section class='timeline'><h3>{e(title)} <code>{e(run_id)}</code> "
        f"<small>({len(events)} events)</small></h3>"
        "<table><thead><tr><th>seq</th><th>task</th><th>kind</th><th>name</th>"
        f"<th>request → response</th></tr></thead><tbody>{rows}</tbody></table>{more}"
        "</section>"
    )


def _side(summary: EventSummary | None) -> str:
    if summary is None:
        return "<em>(nothing)</em>"
    return (
        f"<div class='where'>#{summary.seq} [{e(summary.task)}] {e(summary.kind)} "
        f"{e(summary.name)}{f' (attempt {summary.attempt})' if summary.attempt else ''}</div>"
        f"<div><b>request</b><pre>{e(_cut(summary.request, DETAIL_WIDTH))}</pre></div>"
        f"<div><b>response</b><pre>{e(_cut(summary.response, DETAIL_WIDTH))}</pre></div>"
    )


def _diff_rows(diffs: Iterable[FieldDiff]) -> str:
    return "".join(
        f"<tr><td><code>{e(d.path or '(whole value)')}</code></td><td>{e(d.change)}</td>"
        f"<td><pre>{e(_cut(d.expected, DETAIL_WIDTH))}</pre></td>"
        f"<td><pre>{e(_cut(d.actual, DETAIL_WIDTH))}</pre></td></tr>"
        for d in diffs
    )


def _divergence_block(div: Divergence | None) -> str:
    if div is None:
        return (
            "<section id='divergence'><h2>First divergent step</h2>"
            "<p>The replay followed the original step by step.</p></section>"
        )
    head = div.describe().splitlines()[0]
    diffs = (
        "<table class='diff'><thead><tr><th>field</th><th>change</th><th>expected</th>"
        f"<th>actual</th></tr></thead><tbody>{_diff_rows(div.diffs)}</tbody></table>"
        if div.diffs
        else ""
    )
    return (
        "<section id='divergence'><h2>First divergent step</h2>"
        f"<p class='headline'>{e(head)}</p>"
        "<div class='pair'><div class='expected'><h4>expected (original)</h4>"
        f"{_side(div.expected)}</div><div class='actual'><h4>actual (replay)</h4>"
        f"{_side(div.actual)}</div></div>{diffs}</section>"
    )


def _mismatch_block(mismatch: object) -> str:
    """The request the recording could not answer: the engine's JSON form (``message``,
    ``kind``, ``name``, ``diff`` ...) or a :class:`~sandbox.errors.ReplayMismatchError`."""
    if mismatch is None:
        return ""
    if isinstance(mismatch, dict):
        message = mismatch.get("message", mismatch)
        raw_diff = mismatch.get("diff")
    else:
        message = mismatch
        raw_diff = getattr(mismatch, "diff", None)
    diffs: list[FieldDiff] = []
    for d in raw_diff if isinstance(raw_diff, list) else []:
        if isinstance(d, FieldDiff):
            diffs.append(d)
        elif isinstance(d, dict):
            diffs.append(
                FieldDiff(
                    str(d.get("path", "")), d.get("expected", MISSING), d.get("actual", MISSING)
                )
            )
    table = (
        "<table class='diff'><thead><tr><th>field</th><th>change</th><th>recorded</th>"
        f"<th>requested</th></tr></thead><tbody>{_diff_rows(diffs)}</tbody></table>"
        if diffs
        else ""
    )
    return (
        "<section id='mismatch'><h2>Request with no recording</h2>"
        f"<pre>{e(message)}</pre>{table}</section>"
    )


def _flatten_state_diffs(value: object) -> list[StateDiff]:
    """State diffs given flat, per replay (a list of lists), or per run in a mapping."""
    if value is None:
        return []
    if isinstance(value, StateDiff):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    out: list[StateDiff] = []
    if isinstance(value, list | tuple):
        for item in value:
            out.extend(_flatten_state_diffs(item))
    return out


def _state_block(value: object) -> str:
    diffs = _flatten_state_diffs(value)
    if not diffs:
        return (
            "<section id='state'><h2>End state</h2>"
            "<p>No difference in the services' end states.</p></section>"
        )
    seen: dict[str, list[Any]] = {}  # one row per distinct difference, with its run count
    for d in diffs:
        seen.setdefault(short(d.to_json(), 10**9), [d, 0])[1] += 1
    word = {"missing": "missing from the replay (removed)", "extra": "extra in the replay (added)"}
    rows = "".join(
        f"<tr><td>{e(d.service)}</td><td><code>{e(d.path or '(whole state)')}</code></td>"
        f"<td>{e(word.get(d.status, d.status))}</td>"
        f"<td><pre>{e(_cut(d.expected, DETAIL_WIDTH))}</pre></td>"
        f"<td><pre>{e(_cut(d.actual, DETAIL_WIDTH))}</pre></td><td>{count}</td></tr>"
        for d, count in seen.values()
    )
    return (
        "<section id='state'><h2>End state</h2><p>Rows, keys and files that differ between "
        "the original's end state and the replay's.</p><table class='diff'><thead><tr>"
        "<th>service</th><th>row, key or file</th><th>change</th><th>expected (original)</th>"
        "<th>actual (replay)</th><th>runs</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _pick_divergence(
    report: ReportLike, replayed: Snapshot | None
) -> tuple[int | None, Divergence | None]:
    """The replay shown and its first divergence: the replayed snapshot's own, else the
    first replay that diverged."""
    divs = list(report.divergences)
    replays = list(report.replays)
    if replayed is not None and replayed.run_id in replays:
        i = replays.index(replayed.run_id)
        return i, divs[i] if i < len(divs) else None
    for i, div in enumerate(divs):
        if div is not None:
            return i, div
    return (0, None) if divs else (None, None)


# --- the page -------------------------------------------------------------------------------


def render_report(original: Snapshot, replayed: Snapshot | None, report: ReportLike) -> str:
    """The report page (a complete HTML document) for one replay of ``original``."""
    manifest = original.manifest
    _, div = _pick_divergence(report, replayed)
    failure = manifest.failure.reason if manifest.failure else ""
    notes = "".join(f"<li>{e(n)}</li>" for n in report.notes)
    replays = ", ".join(f"<code>{e(r)}</code>" for r in report.replays) or "none"
    mark_original = div.expected.seq if div and div.expected else None
    mark_replayed = div.actual.seq if div and div.actual else None
    left = _timeline("original", original.run_id, original.events, mark_original)
    right = (
        _timeline("replay", replayed.run_id, replayed.events, mark_replayed)
        if replayed is not None
        else "<section class='timeline'><h3>replay</h3><p>No replayed log.</p></section>"
    )
    title = f"replay of {original.run_id}"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width'><title>{e(title)}</title>"
        f"<style>{CSS}</style></head><body>"
        f"<header><h1>Replay of <code>{e(original.run_id)}</code></h1>"
        f"<p>{e(manifest.name)}{' · ' if manifest.name and failure else ''}"
        f"{e(failure)}</p><p class='meta'>captured {e(manifest.created.isoformat())}"
        f" · replays: {replays}</p></header>"
        f"<section id='summary'>{_verdict_block(report.verdict)}"
        + (f"<h3>Notes</h3><ul class='notes'>{notes}</ul>" if notes else "")
        + "</section>"
        + _divergence_block(div)
        + _mismatch_block(report.mismatch)
        + f"<section id='timelines'><h2>Timelines</h2><div class='pair'>{left}{right}</div>"
        "</section>" + _state_block(report.state_diffs) + "</body></html>\n"
    )


def write_report(
    path: str | os.PathLike[str],
    original: Snapshot,
    replayed: Snapshot | None,
    report: ReportLike,
) -> Path:
    """Render the page and write it atomically to ``path``; return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, render_report(original, replayed, report).encode("utf-8"))
    out.chmod(0o644)  # a page to share, not a secret (the temporary file was private)
    return out


def write_store_report(
    path: str | os.PathLike[str], store: DirectoryStore, report: ReportLike
) -> Path:
    """Write the page for ``report``, loading the original run from ``store`` and, beside it,
    the first replayed run that diverged (or else the first replay) when the store holds it."""
    original = store.load(report.original)
    replays = list(report.replays)
    divergent = [r for r, d in zip(replays, report.divergences, strict=False) if d is not None]
    shown = next((r for r in [*divergent, *replays] if store.exists(r)), None)
    replayed = store.load(shown) if shown is not None else None
    return write_report(path, original, replayed, report)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 24px 48px;
color:#1d2330;background:#fafbfc}
h1{font-size:22px;margin:20px 0 4px}h2{font-size:17px;margin:28px 0 8px}
h3{font-size:15px;margin:12px 0 6px}h4{margin:4px 0}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{margin:2px 0;white-space:pre-wrap;word-break:break-word}
.meta,.note,small{color:#5b6475}
.verdict{display:inline-block;font-size:20px;font-weight:700;padding:6px 14px;
border-radius:6px;margin:8px 0}
.verdict.reproduced{background:#fde2e1;color:#a1120b;border:1px solid #f5a3a0}
.verdict.gone{background:#dff5e3;color:#116329;border:1px solid #9bd8a8}
.verdict.inconclusive{background:#fff0c2;color:#7a4a00;border:1px solid #f0b429}
table{border-collapse:collapse;width:100%;background:#fff;margin:6px 0}
th,td{border:1px solid #e1e4e8;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
tr.reproduced td:nth-child(2){color:#a1120b;font-weight:600}
tr.gone td:nth-child(2){color:#116329}
tr.inconclusive td:nth-child(2){color:#7a4a00;font-weight:600}
tr.divergent td{background:#fff3bf;font-weight:600}
tr.divergent td:first-child{border-left:4px solid #e8590c}
td.summary{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;
word-break:break-word}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.expected,.actual{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:8px}
.expected{border-top:4px solid #2b8a3e}.actual{border-top:4px solid #e8590c}
.headline{font-weight:600}
.kind{display:inline-block;padding:0 5px;border-radius:3px;background:#e7ecf3;font-size:12px}
.k-llm{background:#e5dbff}.k-tool{background:#d0ebff}.k-result{background:#ffe8cc}
.k-timeout{background:#ffc9c9}.k-retry{background:#ffec99}
"""
