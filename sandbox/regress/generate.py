"""Turn a captured failure into a pytest file that fails while the bug is present.

The file is plain text built from the manifest alone (run id, name, failure reason and
predicate, entrypoint): nothing from the snapshot is executed, and every value taken from it
enters the code as a ``repr()`` literal or as escaped docstring text. The generated test
replays the run with :func:`sandbox.replay.engine.replay` as a
:class:`~sandbox.replay.plan.ReplayPlan` says, and asserts that every run was judged and the
recorded failure did **not** come back (the verdict is *gone*): it fails before the fix, fails
when a run is inconclusive (never a pass on a crash or a recording mismatch), and passes after.
"""

from __future__ import annotations

import json
import keyword
import os
import re
from collections.abc import Sequence
from pathlib import Path

from sandbox.errors import RegressionError
from sandbox.names import STORE_ENV
from sandbox.replay.serving.matcher import MissMode
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.manifest import Manifest, Predicate
from sandbox.snapshot.predicate_syntax import predicate_text
from sandbox.snapshot.store import atomic_write

DOC_WIDTH = 88
_TOKEN = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)|.", re.S)
"""One character of escaped text: an escape sequence or a plain character."""


def regression_test_name(run_id: str) -> str:
    """A valid test function name for a run id: ``test_replay_orders_20240301t...``."""
    slug = re.sub(r"\W+", "_", run_id.lower(), flags=re.ASCII).strip("_") or "run"
    name = f"test_replay_{slug}"
    return name if name.isidentifier() and not keyword.iskeyword(name) else "test_replay_run"


def _escape(text: str, quote: str) -> str:
    """``text`` as the inside of a Python string literal quoted with ``quote``, in printable
    ASCII only (so no character can end the literal, or look like another)."""
    out = []
    for ch in text:
        if ch == "\\" or (quote and ch == quote):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            code = ord(ch)
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
    return "".join(out)


def py_str(text: str) -> str:
    """A string literal for ``text`` (like ``repr()``, ASCII only, double quotes unless the
    text holds more of them than single quotes, as ruff's formatter writes it)."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    return quote + _escape(text, quote) + quote


def py_assign(name: str, text: str | None, width: int = 100) -> list[str]:
    """``NAME = "..."``, split over parenthesized lines when it would be too long."""
    if text is None:
        return [f"{name} = None"]
    one = f"{name} = {py_str(text)}"
    if len(one) <= width:
        return [one]
    chunks: list[str] = []
    current = ""
    for ch in text:
        if len(py_str(current + ch)) > width - 8 and current:
            chunks.append(current)
            current = ""
        current += ch
    chunks.append(current)
    return [f"{name} = (", *(f"    {py_str(c)}" for c in chunks), ")"]


def py_tuple(texts: Sequence[str]) -> str:
    """A tuple literal of strings, as ruff's formatter writes a short one."""
    items = [py_str(t) for t in texts]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def doc_text(value: object, limit: int = 500) -> str:
    """``value`` as text that is safe inside a triple-quoted docstring (escaped as in a
    string literal), cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    # A quote is escaped only when another follows it: no run of three can end the docstring.
    return re.sub(r'"(?=")', r'\\"', _escape(text, ""))


def _wrap(label: str, text: str) -> list[str]:
    """``label: text`` wrapped at :data:`DOC_WIDTH`, continuation lines indented; a word
    longer than a line is cut (never inside an escape sequence)."""
    words: list[str] = []
    for word in text.split(" "):
        current = ""
        for token in _TOKEN.findall(word):
            if len(current) + len(token) > DOC_WIDTH - 8:
                words.append(current)
                current = ""
            current += token
        words.append(current)
    lines: list[str] = []
    line = f"{label}:"
    for word in words:
        if len(line) + 1 + len(word) > DOC_WIDTH and line != f"{label}:":
            lines.append(line.rstrip())
            line = "    " + word
        else:
            line = f"{line} {word}"
    lines.append(line.rstrip())
    return lines


def regression_source(
    manifest: Manifest,
    *,
    store: str,
    times: int = 1,
    entrypoint: str | None = None,
    predicate: Predicate | None = None,
    timeout: float | None = None,
    rules: Sequence[str] = (),
    miss: str = "fail",
) -> str:
    """The text of a regression test module for the run ``manifest`` describes.

    ``store`` is the store location as the test should find it: a path relative to the test
    file's folder (or absolute). ``$SANDBOX_STORE`` overrides it when the test runs.
    ``predicate`` judges the replays instead of the recorded one; it enters the file as its
    text (:mod:`sandbox.snapshot.predicate_syntax`), parsed when the test runs. ``timeout``
    limits each replayed run's seconds (``None``: the replay's default). ``rules`` are the
    replay's policy rules (``live=tool:db.*``, in order) and ``miss`` its miss mode, checked
    here and written as literals.
    """
    PolicySet.from_rules(rules)  # an unknown policy or kind is refused here, not in the test
    policed = bool(rules) or MissMode.parse(miss) is not MissMode.FAIL
    if times < 1:
        raise RegressionError(f"times must be at least 1, got {times}")
    if timeout is not None and not timeout > 0:
        raise RegressionError(f"timeout must be a positive number of seconds, got {timeout}")
    failure = manifest.failure
    reason = failure.reason if failure and failure.reason else "(no reason recorded)"
    shown = predicate or (failure.predicate if failure else None)
    judged_by = (
        predicate_text(shown)
        if shown is not None
        else (f"exception={failure.error.type}" if failure and failure.error else None)
    )
    ep = manifest.entrypoint
    captured_ep = (
        (ep.target or "") if ep and ep.kind == "callable" else " ".join(ep.command) if ep else ""
    )
    doc = [
        f"Regression test for the captured run {doc_text(manifest.run_id)}.",
        "",
        *_wrap("Captured", doc_text(manifest.name or manifest.run_id)),
        f"    on {manifest.created.isoformat()}, {len(manifest.services)} service(s) "
        f"with their state{': ' if manifest.services else ''}"
        + doc_text(", ".join(f"{s.name} ({s.kind})" for s in manifest.services)),
        *_wrap("Entrypoint", doc_text(captured_ep or "(not recorded)")),
        *_wrap("Failure", doc_text(reason)),
        *_wrap("Predicate", doc_text(judged_by) if judged_by else "(the recorded exception)"),
        *(_wrap("Policies", doc_text(", ".join([*rules, f"miss={miss}"]))) if policed else []),
        "",
        f"The run is replayed {times} time(s) in the sandbox: the services restored to their",
        "captured state, clocks frozen, model calls answered from the recording. The test",
        "asserts every run was judged and the failure did NOT come back: it fails while the",
        "bug is present, and when a run could not be judged (a recording mismatch, another",
        "exception); it passes once the bug is fixed.",
        "",
        f"The store is found at STORE (relative to this file) unless ${STORE_ENV} is set.",
        "Generated by `sandbox pytest`.",
    ]
    marks = ["@pytest.mark.replay_regression"]
    if manifest.services:
        marks.append("@pytest.mark.docker")
    lines = [
        '"""' + "\n".join(doc) + '\n"""',
        "",
        "from __future__ import annotations",
        "",
        "import os",
        "from pathlib import Path",
        "",
        "import pytest",
        "",
        "from sandbox.replay import MissMode, PolicySet, ReplayPlan, replay",
        "from sandbox.snapshot.predicate_syntax import parse_predicate",
        "from sandbox.snapshot.store import open_store",
        "",
        *py_assign("RUN_ID", manifest.run_id),
        *py_assign("FAILURE", reason),
        f"TIMES = {times!r}",
        *py_assign("ENTRYPOINT", entrypoint),
        *py_assign("STORE", store),
        *py_assign("PREDICATE", predicate_text(predicate) if predicate is not None else None),
        f"TIMEOUT = {float(timeout)!r}" if timeout is not None else "TIMEOUT = None",
        f"POLICIES = {py_tuple(rules)}",
        *py_assign("MISS", miss),
        "",
        "",
        "def _store_path() -> Path:",
        f"    location = os.environ.get({py_str(STORE_ENV)})",
        "    if location:",
        "        return Path(location)",
        "    return (Path(__file__).parent / STORE).resolve()",
        "",
        "",
        *marks,
        f"def {regression_test_name(manifest.run_id)}() -> None:",
        '    """Every replayed run is judged, and the recorded failure is gone."""',
        "    store = open_store(_store_path())",
        "    predicate = parse_predicate(PREDICATE) if PREDICATE is not None else None",
        "    plan = ReplayPlan(",
        "        times=TIMES,",
        "        entrypoint=ENTRYPOINT,",
        "        predicate=predicate,",
        "        timeout=TIMEOUT,",
        "        policies=PolicySet.from_rules(POLICIES),",
        "        miss=MissMode.parse(MISS),",
        "    )",
        "    report = replay(RUN_ID, plan, store=store)",
        "    verdict = report.verdict",
        '    summary = f"{FAILURE}: {verdict.summary()}\\n" + report.describe()',
        '    assert verdict.outcome != "inconclusive", summary',
        '    assert verdict.outcome == "gone", summary',
        "",
    ]
    return "\n".join(lines)


def write_regression_test(
    path: str | os.PathLike[str],
    manifest: Manifest,
    *,
    store: str | os.PathLike[str],
    times: int = 1,
    entrypoint: str | None = None,
    predicate: Predicate | None = None,
    overwrite: bool = False,
    timeout: float | None = None,
    rules: Sequence[str] = (),
    miss: str = "fail",
) -> Path:
    """Write the test module for ``manifest`` to ``path`` (atomically); the store is referred
    to relative to the test file's folder. Refuses to replace a file unless ``overwrite``."""
    out = Path(path)
    if out.suffix != ".py":
        raise RegressionError(f"a pytest file must end in .py: {out}")
    if out.exists() and not overwrite:
        raise RegressionError(f"{out} exists; pass overwrite to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(Path(store).resolve(), out.parent.resolve())
    source = regression_source(
        manifest,
        store=relative,
        times=times,
        entrypoint=entrypoint,
        predicate=predicate,
        timeout=timeout,
        rules=rules,
        miss=miss,
    )
    atomic_write(out, source.encode("utf-8"))
    return out
