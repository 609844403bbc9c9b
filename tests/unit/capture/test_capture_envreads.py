"""Settings a script reads as it starts, before it opens ``capture.run`` (once
``sandbox.capture`` is imported), are among the variables the run records; secrets among them
are still redacted; a variable only set (a test's ``monkeypatch.setenv`` reads the value it
will restore) is not."""

from __future__ import annotations

import os
import runpy
import threading
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


def _setting() -> str | None:
    return os.environ.get("SERVICE_SETTING")  # a framework's setting, read at each request


def test_a_name_read_outside_runs_while_serving_is_looked_at_once_per_reading_code(
    store: DirectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read again and again outside any run, not as the program starts (a server's
    thread), a name is not noted, and the stack is walked for it once for the code that
    reads it; the same name read by a script's top level afterwards is still noted."""
    from sandbox.capture import envreads

    monkeypatch.setenv("SERVICE_SETTING", "on")
    walks: list[object] = []
    real = envreads._read_by_the_agent

    def counted(frame: object) -> bool:
        walks.append(frame)
        return real(frame)

    monkeypatch.setattr(envreads, "_read_by_the_agent", counted)
    serving = threading.Thread(target=lambda: [_setting() for _ in range(50)])
    serving.start()
    serving.join()
    assert len(walks) == 1 and "SERVICE_SETTING" not in envreads.read_before_runs()
    script = tmp_path / "late_script.py"
    script.write_text(
        "import os\nfrom sandbox import capture\nSETTING = os.environ['SERVICE_SETTING']\n"
        "with capture.run('late', store=STORE, packages=False) as rec:\n    pass\n"
        "RUN = rec.run_id\n"
    )
    done = runpy.run_path(str(script), init_globals={"STORE": store})
    assert len(walks) == 2
    assert store.load_manifest(done["RUN"]).env["SERVICE_SETTING"] == "on"


def test_a_copy_of_the_environment_holds_the_writes_made_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each run's start copies the environment, decoded once until a write: a copy holds
    what was set, updated and deleted through ``os.environ`` before it was made, and
    changing a copy changes neither the environment nor the next copy."""
    from sandbox.capture import envreads

    undo = envreads.track_env_reads()
    try:
        assert isinstance(os.environ, envreads._TrackedEnviron)
        assert "ZZ_COPY_SET" not in os.environ.copy()
        monkeypatch.setenv("ZZ_COPY_SET", "1")
        assert os.environ.copy()["ZZ_COPY_SET"] == "1"
        monkeypatch.setenv("ZZ_COPY_SET", "2")
        assert os.environ.copy()["ZZ_COPY_SET"] == "2"
        os.environ.update(ZZ_COPY_UPDATED="3")
        monkeypatch.delenv("ZZ_COPY_UPDATED")  # restored as absent afterwards
        assert "ZZ_COPY_UPDATED" not in os.environ.copy()
        monkeypatch.delenv("ZZ_COPY_SET")
        assert "ZZ_COPY_SET" not in dict(os.environ.items())
        mine = os.environ.copy()
        mine["ZZ_COPY_MINE"] = "x"
        assert "ZZ_COPY_MINE" not in os.environ
        assert "ZZ_COPY_MINE" not in os.environ.copy()
        assert os.environ.copy() == {k: os.environ[k] for k in os.environ}
    finally:
        undo()
