"""The report page: one self-contained HTML file per replay, diff or fork.

::

    page = render(comparison, verdict)          # a complete HTML document
    write(path, comparison, verdict)            # the same, written atomically

The page is made of sections (:data:`SECTIONS`, one Jinja2 template each under
``templates/``), in this order: the verdict header (three outcomes, coloured, with the
failure predicate and what each run showed), the first divergent step with its structured
diff, the request the recording could not answer, the conversation (messages, model calls,
tool calls nested under the message that asked for them, retrievals, HTTP and service steps),
the waterfall of step durations with the task lanes, the end-state differences as tables,
the notes. When ``sandbox explain`` ran on the original, what its failure needs comes right
after the header. A new section is a template and its name in :data:`SECTIONS`.

**Small and lazy.** The runs' steps travel as JSON in the page (:mod:`sandbox.report.steps`)
and a small inline script draws them: the conversation and the waterfall in chunks as they
scroll into view, the details of a step (and its raw JSON) when it is opened.

**Safe to open.** Everything from a snapshot is untrusted: the templates escape every value
(Jinja2 autoescape), the JSON is embedded with ``<``, ``>`` and ``&`` escaped, and the script
writes text only (never HTML). A Content-Security-Policy allows only the page's own script
(by hash) and inline styles: the page reaches no network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape

from sandbox.replay.judging.divergence import Divergence, EventSummary
from sandbox.replay.judging.jsondiff import MISSING, FieldDiff
from sandbox.replay.judging.unexpected import REASON_TEXT
from sandbox.replay.judging.verdict import Verdict
from sandbox.report.comparison import Comparison, replay_comparison
from sandbox.report.statetables import state_tables
from sandbox.report.steps import page_data
from sandbox.snapshot.predicate_syntax import predicate_text
from sandbox.snapshot.store import Store, atomic_write

if TYPE_CHECKING:
    from sandbox.replay import ReplayReport

SECTIONS = (
    "header",
    "explain",
    "divergence",
    "mismatch",
    "conversation",
    "waterfall",
    "state",
    "notes",
)
"""The page's sections, in order: ``templates/<name>.html.j2`` each."""


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("sandbox.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = _pretty
    return env


@cache
def _asset(name: str) -> str:
    return resources.files("sandbox.report").joinpath("templates", name).read_text("utf-8")


def _pretty(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def embed_json(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or
    ``&`` (so no ``</script>``), nor the two line separators JavaScript once refused."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _side(summary: EventSummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "where": f"#{summary.seq} [{summary.task}] {summary.kind} {summary.name}"
        + (f" (attempt {summary.attempt})" if summary.attempt else ""),
        "seq": summary.seq,
        "request": _pretty(summary.request),
        "response": _pretty(summary.response),
    }


def _diff_rows(diffs: Any) -> list[FieldDiff]:
    """A mismatch's diff as the replay report keeps it (:meth:`FieldDiff.to_json` each)."""
    return [
        FieldDiff(str(d.get("path", "")), d.get("expected", MISSING), d.get("actual", MISSING))
        for d in diffs or []
        if isinstance(d, dict)
    ]


def _divergence(div: Divergence | None) -> dict[str, Any] | None:
    if div is None:
        return None
    return {
        "head": div.describe().splitlines()[0],
        "reason": div.reason,
        "expected": _side(div.expected),
        "actual": _side(div.actual),
        "diffs": list(div.diffs),
    }


def _verdict(verdict: Verdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    reasons = [REASON_TEXT.get(r, r) for r in verdict.reasons]
    inconclusive = verdict.outcome == "inconclusive"
    first = next((r for r in verdict.runs if r.outcome == "inconclusive"), None)
    return {
        "outcome": verdict.outcome,
        "why": ", ".join(reasons) if inconclusive else "",
        "detail": first.detail if inconclusive and first is not None else "",
        "summary": verdict.summary(),
        "counts": (verdict.reproduced, verdict.gone, verdict.inconclusive, verdict.total),
        "predicate": predicate_text(verdict.predicate),
        "runs": verdict.runs,
    }


def _sides(comparison: Comparison) -> list[dict[str, Any]]:
    """Each run's steps, the one to show first first: the after side, unless the divergent
    step is one the after side never made. The divergent step is marked on the side(s)
    where it is: both when it changed, the original's when missing, the other's when extra."""
    div, blobs = comparison.divergence, comparison.blobs
    expected = div.expected.seq if div and div.expected and div.reason != "extra" else None
    actual = div.actual.seq if div and div.actual and div.reason != "missing" else None
    sides = [page_data(comparison.before, comparison.labels[0], expected, blobs)]
    if comparison.after is not None:
        after = page_data(comparison.after, comparison.labels[1], actual, blobs)
        if div is not None and div.reason == "missing":
            sides.append(after)
        else:
            sides.insert(0, after)
    return sides


def context(comparison: Comparison, verdict: Verdict | None) -> dict[str, Any]:
    """What the templates read (everything escaped by Jinja2 when drawn)."""
    before, after, div = comparison.before, comparison.after, comparison.divergence
    sides = _sides(comparison)
    mismatch = comparison.mismatch
    return {
        "heading": comparison.heading,
        "labels": comparison.labels,
        "before": before,
        "after": after,
        "failure": before.manifest.failure,
        "failure_predicate": (
            predicate_text(before.manifest.failure.predicate)
            if before.manifest.failure and before.manifest.failure.predicate
            else ""
        ),
        "verdict": _verdict(verdict),
        "divergence": _divergence(div),
        "mismatch": (
            {"message": str(mismatch.get("message", "")), "diffs": _diff_rows(mismatch.get("diff"))}
            if mismatch
            else None
        ),
        "tables": state_tables(comparison.state_diffs),
        "notes": list(comparison.notes),
        "explanation": comparison.explanation,
        "sides": [{"run": s["run"], "label": s["label"], "count": len(s["steps"])} for s in sides],
        "data": embed_json({"sides": sides}),
    }


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; img-src data:; base-uri 'none'; form-action 'none'"
    )


def render(comparison: Comparison, verdict: Verdict | None = None) -> str:
    """The page (a complete HTML document) comparing two runs; with a replay's ``verdict``,
    headed by it."""
    script = _asset("page.js")
    return (
        _environment()
        .get_template("page.html.j2")
        .render(
            sections=SECTIONS,
            css=_asset("page.css"),
            script=script,
            csp=_csp(script),
            **context(comparison, verdict),
        )
    )


def write(
    path: str | os.PathLike[str], comparison: Comparison, verdict: Verdict | None = None
) -> Path:
    """Render the page and write it atomically to ``path``; return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, render(comparison, verdict).encode("utf-8"))
    out.chmod(0o644)  # a page to share, not a secret (the temporary file was private)
    return out


def write_store_report(path: str | os.PathLike[str], store: Store, report: ReplayReport) -> Path:
    """Write the page of a replay: the original (from ``store``) against the replayed run
    shown (:func:`~sandbox.report.comparison.replay_comparison`), headed by the verdict."""
    comparison, verdict = replay_comparison(store, report)
    return write(path, comparison, verdict)
