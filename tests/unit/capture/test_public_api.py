"""The public surface of :mod:`sandbox.capture`: the verbs an agent uses, nothing of the
seam, and ``run`` with typed keyword settings.

This file is type-checked with the package (``[tool.mypy] files`` in pyproject.toml): the
calls below must agree with ``run``'s signature, and a call that does not is refused by mypy.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from sandbox import capture
from sandbox.snapshot.store import open_store

ROOT = Path(__file__).resolve().parents[3]
VERBS = {
    "AsyncRetrying",
    "Capture",
    "ExceptionPredicate",
    "RedactionConfig",
    "ResultPredicate",
    "Retrying",
    "SQLInvariant",
    "ServiceSpec",
    "active",
    "amemory_read",
    "amemory_write",
    "flush",
    "mark_failed",
    "memory_delete",
    "memory_read",
    "memory_write",
    "now",
    "result",
    "retriever",
    "retrying",
    "run",
    "state",
    "task_scope",
    "timeout",
    "tool",
}
SEAM = {"Adapter", "Boundary", "Call", "Outcome", "RecordedError", "through", "athrough", "use"}


def test_capture_exports_the_user_verbs_only() -> None:
    assert set(capture.__all__) == VERBS
    assert not SEAM & set(vars(capture)), "seam internals live in sandbox.seam"


def test_run_takes_typed_keyword_settings() -> None:
    params = inspect.signature(capture.run).parameters
    assert next(iter(params)) == "name"
    settings = [p for name, p in params.items() if name != "name"]
    assert {"store", "services", "seed", "redaction", "labels"} <= {p.name for p in settings}
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in settings)
    assert all(p.annotation is not inspect.Parameter.empty for p in settings)


def test_run_records_with_its_keyword_settings(tmp_path: Path) -> None:
    with capture.run(
        "api",
        store=tmp_path,
        seed=7,
        services="none",
        labels={"team": "checkout"},
        redaction=capture.RedactionConfig(),
    ) as rec:
        capture.result({"ok": True})
    manifest = open_store(tmp_path).load_manifest(rec.writer.manifest.run_id)
    assert manifest.seeds["run"] == 7
    assert manifest.labels.pop("sandbox.opening").isdigit()
    assert float(manifest.labels.pop("sandbox.opening.after_s")) >= 0
    assert manifest.labels.pop("sandbox.naming") == "origin"
    assert manifest.labels == {"team": "checkout", "sandbox.opened": "capture.run"}


def test_mypy_refuses_a_setting_of_the_wrong_type(tmp_path: Path) -> None:
    """``run("x", seed="seven")`` was accepted while ``run`` took ``**settings: Any``."""
    snippet = tmp_path / "wrong.py"
    snippet.write_text(
        "from sandbox import capture\n"
        'capture.run("x", seed="seven")\n'
        'capture.run("x", stor="snapshots")\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(snippet)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Argument "seed" to "Capture" has incompatible type "str"' in done.stdout
    assert 'Unexpected keyword argument "stor"' in done.stdout
