"""Settings read before a run starts (a script's ``os.environ[...]`` at import, once
``sandbox.capture`` is imported) are among the variables the run records; secrets among them
are still redacted."""

from __future__ import annotations

import os

import pytest

from sandbox import capture
from sandbox.snapshot.store import DirectoryStore


def test_variables_read_before_the_run_are_recorded_and_secrets_redacted(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MODEL", "gpt-test")
    monkeypatch.setenv("SUPPORT_API_KEY", "sk-support-0123456789abcdef")
    model = os.environ["AGENT_MODEL"]  # read at import, as a script's settings are
    key = os.environ.get("SUPPORT_API_KEY")
    os.environ["NEVER_READ"] = "x"  # set, not read (monkeypatch reads the old value)
    try:
        with capture.run("settings", store=store, packages=False) as rec:
            capture.result({"model": model, "keyed": key is not None})
    finally:
        del os.environ["NEVER_READ"]
    env = store.load_manifest(rec.run_id).env
    assert env["AGENT_MODEL"] == "gpt-test"
    assert env["SUPPORT_API_KEY"] != "sk-support-0123456789abcdef"
    assert env["SUPPORT_API_KEY"].startswith("<")
    assert "NEVER_READ" not in env
