"""Settings a script reads as it starts, before it opens ``capture.run`` (once
``sandbox.capture`` is imported), are among the variables the run records; secrets among them
are still redacted; a variable only set (a test's ``monkeypatch.setenv`` reads the value it
will restore) is not."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from sandbox.snapshot.store import DirectoryStore

SCRIPT = """
import os

from openai import OpenAI

from sandbox import capture

MODEL = os.environ["AGENT_MODEL"]
client = OpenAI()  # reads OPENAI_API_KEY

with capture.run("settings", store=STORE, packages=False) as rec:
    capture.result({"model": MODEL})
RUN = rec.run_id
"""


def test_variables_a_script_reads_at_import_are_recorded_and_secrets_redacted(
    store: DirectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-support-0123456789abcdef")
    monkeypatch.setenv("NEVER_READ", "x")
    script = tmp_path / "settings_script.py"
    script.write_text(SCRIPT)
    done = runpy.run_path(str(script), init_globals={"STORE": store})
    env = store.load_manifest(done["RUN"]).env
    assert env["AGENT_MODEL"] == "gpt-test"
    assert env["OPENAI_API_KEY"] != "sk-support-0123456789abcdef"
    assert env["OPENAI_API_KEY"].startswith("<")
    assert "NEVER_READ" not in env
