"""The HTML report: content, escaping of untrusted event data, self-containment."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import report_factory
from report_factory import HOSTILE

from sandbox.errors import ReplayMismatchError
from sandbox.replay.verdict import ReplayOutcome, judge
from sandbox.report import render_report, write_report, write_store_report
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import ExceptionPredicate

VOID = {"meta", "br", "img", "hr", "input", "link"}


class _Tags(HTMLParser):
    """Collects tags, attributes and text; checks that every element is closed."""

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
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


def test_page_shows_verdict_divergence_timelines_and_state() -> None:
    original, replayed, report = report_factory.build()
    page = render_report(original, replayed, report)
    tags = parse(page)
    assert tags.errors == [] and tags.stack == []
    text = "".join(tags.text)
    assert "orders-1" in text and "orders-1-replay-1" in text
    assert "reproduced 1/1" in text
    assert "class='verdict reproduced'" in page
    # the divergent step is highlighted on both sides, expected vs actual shown
    assert page.count("class='divergent' id='divergent-3'") == 2
    assert "step 3: call #2 of tool 'place_order' in task 'main' differs" in text
    assert '"B2-changed"' in text and '"A1"' in text
    assert "request.sku" in text
    # end-state diff and notes
    assert "orders[2]" in text and "added" in text
    assert f"note {HOSTILE}" in text


def test_gone_is_green() -> None:
    original, replayed, report = report_factory.build(reproduced=False)
    page = render_report(original, replayed, report)
    assert "class='verdict gone'" in page
    assert "gone 0/1" in "".join(parse(page).text)


def test_a_run_that_could_not_be_judged_is_amber_with_its_reason() -> None:
    original, replayed, report = report_factory.build(reproduced=False)
    report.verdict = judge(
        ExceptionPredicate(type="DuplicateOrder"),
        [ReplayOutcome(error=ErrorInfo(type="KeyError", message="'PRICING_URL'"))],
        environ={},
    )
    page = render_report(original, replayed, report)
    text = "".join(parse(page).text)
    assert "class='verdict inconclusive'" in page and "verdict gone" not in page
    assert "could not judge: a different exception 0/1" in text
    assert "a missing environment variable (PRICING_URL is not set)" in text
    assert ".verdict.inconclusive{background:#fff0c2" in page  # amber


def test_untrusted_content_is_escaped_everywhere() -> None:
    original, replayed, report = report_factory.build()
    report.mismatch = ReplayMismatchError(
        f"no recorded tool {HOSTILE!r}",
        kind="tool",
        name=HOSTILE,
        diff=[{"path": HOSTILE, "change": "changed", "expected": HOSTILE, "actual": 1}],
    )
    page = render_report(original, replayed, report)
    tags = parse(page)
    assert set(tags.tags) <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "h4",
        "p", "code", "section", "div", "table", "thead", "tbody", "tr", "th", "td", "pre",
        "span", "small", "em", "b", "ul", "li",
    }  # fmt: skip
    assert "script" not in tags.tags and "img" not in tags.tags
    assert not any(name.startswith("on") for name, _ in tags.attrs)
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;" in page
    # the hostile text still reaches the reader, as text
    assert HOSTILE in "".join(tags.text)
    assert "Request with no recording" in page
    # the engine's JSON form of the same mismatch
    report.mismatch = {"message": HOSTILE, "diff": [{"path": "a", "expected": HOSTILE}]}
    page = render_report(original, replayed, report)
    assert "<script>" not in page and page.count("&lt;script&gt;") >= 3
    assert "removed" in page


def test_page_is_self_contained() -> None:
    original, replayed, report = report_factory.build()
    page = render_report(original, replayed, report)
    tags = parse(page)
    assert not [name for name, _ in tags.attrs if name in {"src", "href", "srcset", "action"}]
    assert {"script", "link", "iframe", "object", "img"}.isdisjoint(tags.tags)
    css = re.search(r"<style>(.*?)</style>", page, re.S)
    assert css is not None
    assert "@import" not in css.group(1) and "url(" not in css.group(1)


def test_without_replayed_log_or_divergence() -> None:
    original, _, report = report_factory.build()
    report.divergences = [None]
    page = render_report(original, None, report)
    assert "No replayed log." in page
    assert "followed the original step by step" in page
    assert "class='divergent'" not in page


def test_write_report_is_atomic_and_complete(tmp_path: Path) -> None:
    original, replayed, report = report_factory.build()
    out = write_report(tmp_path / "sub" / "r.html", original, replayed, report)
    assert out.read_text(encoding="utf-8") == render_report(original, replayed, report)
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]


def test_write_store_report_loads_the_divergent_replay(
    store: DirectoryStore, tmp_path: Path
) -> None:
    original, replayed, report = report_factory.build()
    store.save(original)
    store.save(replayed)
    report.replays = ["not-in-store", replayed.run_id]
    report.divergences = [None, report.divergences[0]]
    out = write_store_report(tmp_path / "r.html", store, report)
    assert out.read_text(encoding="utf-8") == render_report(original, replayed, report)


def test_end_state_table_shows_each_row_difference_once_with_its_runs() -> None:
    from sandbox.replay.divergence import diff_states

    original, replayed, report = report_factory.build()
    row = {"id": 2, "item": "blue widget", "qty": 2}
    per_run = diff_states(
        {"db": {"tables": {"orders": [{"id": 1}, row]}}},
        {"db": {"tables": {"orders": [{"id": 1}]}}},
    )
    report.state_diffs = [per_run, per_run, []]
    page = render_report(original, replayed, report)
    text = "".join(parse(page).text)
    assert page.count("<code>tables.orders[1]</code>") == 1
    assert "missing from the replay (removed)" in text
    assert '"item": "blue widget"' in text
    assert "<td>2</td></tr>" in page  # two runs of three left this difference
