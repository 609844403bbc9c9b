"""The HTML report, built from real replay reports of the engine (:mod:`report_runs`):
verdict header, first divergent step, end-state tables, the runs' steps as the page's
script draws them, escaping of untrusted content, self-containment."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from sandbox.replay import ReplayReport
from sandbox.report import render, replay_comparison, write, write_store_report
from sandbox.report.steps import page_data
from tests.unit.report_runs import HOSTILE, Captured, capture_orders


class _Tags(HTMLParser):
    """Collects tags, attributes and text; checks that every element is closed."""

    VOID = frozenset({"meta", "br", "img", "hr", "input", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] != "script":
            self.text.append(data)


def parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == []
    return parser


def text_of(page: str) -> str:
    return " ".join(" ".join(parse(page).text).split())


def data_of(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    return capture_orders(tmp_path_factory.mktemp("orders"))


@pytest.fixture(scope="module")
def reports(captured: Captured) -> dict[str, ReplayReport]:
    return {entry: captured.replay(entry) for entry in ("main", "main_fixed", "main_broken")}


def page_for(captured: Captured, report: ReplayReport) -> str:
    return render(*replay_comparison(captured.store, report))


def test_reproduced_replay_heads_the_page_in_red_with_what_it_saw(
    captured: Captured, reports: dict[str, ReplayReport]
) -> None:
    report = reports["main"]
    assert report.verdict.outcome == "reproduced", report.describe()
    page = page_for(captured, report)
    text = text_of(page)
    assert '<div class="verdict reproduced" id="verdict">' in page
    assert "reproduced 1/1 reproduced" in text
    assert "exception=RuntimeError:duplicate order: 2 rows for one request" in text
    assert report.verdict.runs[0].detail in text
    assert "The replay followed the original step by step." in text
    assert "No difference in the services' end states." in text


def test_gone_shows_the_extra_step_and_the_missing_row(
    captured: Captured, reports: dict[str, ReplayReport]
) -> None:
    report = reports["main_fixed"]
    assert report.verdict.outcome == "gone", report.describe()
    page = page_for(captured, report)
    text = text_of(page)
    assert '<div class="verdict gone" id="verdict">' in page
    assert "gone 0/1 reproduced" in text
    assert re.search(r"replay step \d+: call #1 of tool 'find_order' in task 'worker-\d' was "
                     "not in the original", text)  # fmt: skip
    # the end state: the second order row is missing from the replay, shown with its columns
    assert "sqlite: rows of table orders" in text
    row = re.search(r'<table class="state rows">.*?</table>', page, re.S)
    assert row is not None
    assert [h for h in re.findall(r"<th>(.*?)</th>", row.group(0))] == [
        "row", "change", "id", "item", "qty"
    ]  # fmt: skip
    assert re.search(r"<td>3</td><td>missing from the replay</td><td>3</td><td>blue widget</td>"
                     r"<td>2</td>", row.group(0))  # fmt: skip
    # the divergent step is marked on the replay's side only, which is shown first
    sides = data_of(page)["sides"]
    assert [s["label"] for s in sides] == ["replay", "original"]
    divergence = report.divergences[0]
    assert divergence is not None and divergence.actual is not None
    assert sides[0]["mark"] == divergence.actual.seq and sides[1]["mark"] is None


def test_a_run_that_could_not_be_judged_is_amber_with_its_reason(
    captured: Captured, reports: dict[str, ReplayReport]
) -> None:
    report = reports["main_broken"]
    assert report.verdict.outcome == "inconclusive", report.describe()
    page = page_for(captured, report)
    text = text_of(page)
    assert '<div class="verdict inconclusive" id="verdict">' in page
    assert "inconclusive 0/1 reproduced a different exception" in text
    assert "KeyError: 'PRICING_URL'" in text and "PRICING_URL is not set" in text
    assert "verdict gone" not in page and "verdict reproduced" not in page
    assert "call #1 of tool 'place_order'" in text and "differs" in text
    assert "KeyError" in json.dumps(data_of(page)["sides"][0]["steps"])


def test_each_model_call_is_one_step_and_tool_calls_sit_under_it(captured: Captured) -> None:
    original = captured.store.load(captured.run_id)
    side = page_data(original, "original", None, captured.store.get_blob)
    steps = side["steps"]
    kinds = [s["k"] for s in steps]
    assert kinds.count("llm") == 2 and kinds.count("http") == 0  # each exchange folded in
    assert all(s["h"]["method"] == "POST" for s in steps if s["k"] == "llm")
    first_llm = next(s for s in steps if s["k"] == "llm")
    asked = [steps[c] for c in first_llm["c"]]
    assert [(s["k"], s["n"]) for s in asked] == [("tool", "place_order")] * 2
    assert {s["t"] for s in asked} == {"worker-1", "worker-2"}
    assert side["tasks"] == ["main", "worker-2", "worker-1"] or set(side["tasks"]) == {
        "main", "worker-1", "worker-2"
    }  # fmt: skip
    retrieval = next(s for s in steps if s["k"] == "retrieval")
    docs = retrieval["x"]["documents"]
    assert [d["id"] for d in docs] == ["sku-17", "sku-18"]
    assert docs[0]["content"] == "Blue widget, 2 cm, sold in packs of 2."
    # the messages, repeated by every model call, are kept once in the pool
    pool = side["pool"]
    assert [m["role"] for m in pool].count("system") == 1
    second = [s for s in steps if s["k"] == "llm"][1]
    roles = [pool[i]["role"] for i in second["x"]["messages"]["$pool"]]
    assert roles == ["system", "user", "assistant", "tool", "tool"]


def test_untrusted_content_is_escaped_everywhere(
    captured: Captured, reports: dict[str, ReplayReport]
) -> None:
    comparison, verdict = replay_comparison(captured.store, reports["main_broken"])
    comparison = replace(
        comparison,
        notes=[f"note {HOSTILE}"],
        mismatch={"message": HOSTILE, "diff": [{"path": HOSTILE, "expected": HOSTILE}]},
    )
    page = render(comparison, verdict)
    tags = parse(page)
    assert tags.tags.count("script") == 2 and "img" not in tags.tags
    assert not any(name.startswith("on") for name, _ in tags.attrs)
    assert "<img" not in page and page.count("<script") == 2
    assert "&lt;script&gt;" in page  # the notes and the mismatch, as text
    assert f"note {HOSTILE}" in text_of(page) and "Request with no recording" in page
    # the embedded JSON holds the hostile user message with <, > and & escaped
    raw = re.search(r'id="report-data">(.*?)</script>', page, re.S)
    assert raw is not None and "<" not in raw.group(1) and "&" not in raw.group(1)
    pool = [m for side in data_of(page)["sides"] for m in side["pool"]]
    assert any(HOSTILE in str(m.get("content")) for m in pool)


def test_page_is_self_contained_and_runs_only_its_own_script(
    captured: Captured, reports: dict[str, ReplayReport]
) -> None:
    page = page_for(captured, reports["main"])
    tags = parse(page)
    links = [value for name, value in tags.attrs if name in {"src", "href", "srcset", "action"}]
    assert all(value and value.startswith("#") for value in links)
    assert {"link", "iframe", "object", "img"}.isdisjoint(tags.tags)
    css = re.search(r"<style>(.*?)</style>", page, re.S)
    assert css is not None and "@import" not in css.group(1) and "url(" not in css.group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = html.unescape(csp.group(1))
    assert policy.startswith("default-src 'none';")
    assert f"script-src 'sha256-{digest}'" in policy
    assert ".innerHTML" not in script.group(1) and "fetch(" not in script.group(1)


def test_a_diff_of_two_runs_has_no_verdict(
    captured: Captured, reports: dict[str, ReplayReport]
) -> None:
    comparison, _ = replay_comparison(captured.store, reports["main_fixed"])
    assert comparison.after is not None
    page = render(replace(comparison, labels=("run A", "run B"), notes=()))
    text = text_of(page)
    assert f"{comparison.before.run_id} vs {comparison.after.run_id}" in text
    assert 'id="verdict"' not in page
    assert "expected (run A)" in text and "actual (run B)" in text
    assert [s["label"] for s in data_of(page)["sides"]] == ["run B", "run A"]


def test_write_is_atomic_and_write_store_report_shows_the_divergent_replay(
    captured: Captured, reports: dict[str, ReplayReport], tmp_path: Path
) -> None:
    report = reports["main_fixed"]
    comparison, verdict = replay_comparison(captured.store, report)
    out = write(tmp_path / "sub" / "r.html", comparison, verdict)
    assert out.read_text(encoding="utf-8") == render(comparison, verdict)
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]
    same = write_store_report(tmp_path / "s.html", captured.store, report)
    assert same.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_the_committed_demo_run_nests_retries_and_their_calls_under_the_tool() -> None:
    """The orders demo as captured: the model asks for place_order, whose tenacity retries
    enclose each attempt's insert, gateway call and timeout."""
    from sandbox.snapshot import DirectoryStore

    run = DirectoryStore(Path(__file__).parents[2] / "snapshots").load("demo-orders-duplicate")
    side = page_data(run, "original", None)
    steps = side["steps"]

    def tree(i: int) -> list[Any]:
        step = steps[i]
        return [f"{step['k']} {step['n']}", [tree(c) for c in step["c"]]]

    llm = next(i for i, s in enumerate(steps) if s["k"] == "llm")
    charge = "http POST http://127.0.0.1:35895/charge"
    assert tree(llm) == [
        "llm scripted-1",
        [["tool place_order", [
            ["retry retry:place_order", [
                ["tool insert_order", []], [charge, []], ["timeout retry:place_order", []]]],
            ["retry retry:place_order", [["tool insert_order", []], [charge, []]]],
        ]]],
    ]  # fmt: skip
    roots = [f"{steps[i]['k']} {steps[i]['n']}" for i in side["roots"]]
    # random draws fold into one row between the other steps
    assert roots == [
        "random 2 draws: random.seed, uuid4",
        "llm scripted-1",
        "random 1 draw: uuid4",
        "llm scripted-1",
        "result result",
        "state sandbox.failure",
    ]


def test_end_state_tables_name_keys_files_and_cells() -> None:
    """Redis keys, files and a changed cell, as :func:`diff_states` names them in the
    descriptions the service kinds write, become one table per service and kind."""
    from sandbox.replay.judging.divergence import diff_states
    from sandbox.report.statetables import state_tables

    key = {"type": "string", "value": "2", "has_ttl": False}
    diffs = diff_states(
        {
            "cache": {"keys": {"cart:7": key}},
            "work": {"files": {"out/a.txt": {"mode": "0644", "sha256": "a" * 64, "size": 3}}},
            "db": {"tables": {"orders": [{"id": 1, "qty": 2}]}},
        },
        {
            "cache": {"keys": {"cart:7": {**key, "value": "3"}}},
            "work": {"files": {}},
            "db": {"tables": {"orders": [{"id": 1, "qty": 3}]}},
        },
    )
    tables = {(t.service, t.category): t for t in state_tables(diffs)}
    assert sorted(tables) == [("cache", "keys"), ("db", "rows"), ("work", "files")]
    (line,) = tables["cache", "keys"].lines
    assert (line["what"], line["field"], line["change"]) == ("cart:7", "value", "changed")
    assert (line["expected"], line["actual"]) == ("2", "3")
    (line,) = tables["work", "files"].lines
    assert (line["what"], line["change"]) == ("out/a.txt", "missing from the replay")
    rows = tables["db", "rows"]
    assert (rows.title, rows.columns) == ("db: rows of table orders", [])
    assert [(x["what"], x["field"]) for x in rows.lines] == [("1", "qty")]
