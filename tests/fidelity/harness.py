"""Capture and replay agents the way a user does: ``sandbox capture -- python agent.py`` and
``sandbox replay RUN --json``, each a real process; the model is the scripted one
(``examples/_model.py``) behind the real ``openai`` client, tools are real local HTTP
services. Nothing the agents talk to is running any more when they are replayed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples import _model
from sandbox.snapshot.events import Event, LLMCall
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import DirectoryStore

AGENTS = Path(__file__).parent / "agents"
SANDBOX = str(Path(sys.executable).with_name("sandbox"))
API_KEY = "sk-fidelity-test-key-0123456789"
TIMES = 3


Handler = Callable[[str, dict[str, Any]], tuple[int, Any]]
"""(path, JSON body) -> (status, JSON answer): a local HTTP service."""


def base_env(**values: str) -> dict[str, str]:
    """The environment of a capture: this one without any agent variables, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_"))}
    env.pop("TZ", None)
    env.update(values)
    return env


@dataclass
class Captured:
    store: DirectoryStore
    run_id: str
    exit_code: int
    output: str

    @property
    def manifest(self) -> Manifest:
        return self.store.load_manifest(self.run_id)

    @property
    def events(self) -> list[Event]:
        return self.store.load_events(self.run_id)


def capture(
    store: DirectoryStore,
    agent: str,
    env: Mapping[str, str],
    *args: str,
    command: list[str] | None = None,
    extra: tuple[str, ...] = (),
    cwd: Path = AGENTS,
) -> Captured:
    """``sandbox capture --name AGENT -- python agents/AGENT.py ARGS`` (or ``command``, run
    in ``cwd``)."""
    cmd = command or [sys.executable, f"{agent}.py", *args]
    done = subprocess.run(
        [SANDBOX, "capture", "--store", str(store.root), "--name", agent, *extra, "--", *cmd],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r"captured run (\S+) \(", done.stderr)
    assert found, done.stderr
    return Captured(store, found.group(1), done.returncode, done.stdout + done.stderr)


def capture_until_failed(
    store: DirectoryStore, agent: str, env: Mapping[str, str], tries: int = 20
) -> Captured:
    """Capture ``agent`` until a run fails (its bug shows for some random draws only)."""
    for _ in range(tries):
        run = capture(store, agent, env)
        if run.manifest.failure is not None:
            return run
    raise AssertionError(f"{agent} never failed in {tries} captures: {run.output}")


def run_cli(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SANDBOX, *args], env=dict(env), capture_output=True, text=True, timeout=300, check=False
    )


@dataclass
class Replayed:
    exit_code: int
    report: dict[str, Any]
    output: str

    @property
    def reproduced(self) -> int:
        return int(self.report["verdict"]["reproduced"])

    @property
    def total(self) -> int:
        return int(self.report["verdict"]["total"])


def replay(
    store: DirectoryStore,
    run_id: str,
    env: Mapping[str, str] | None = None,
    *extra: str,
    times: int = TIMES,
    cwd: Path | None = None,
) -> Replayed:
    """``sandbox replay RUN --times N --json`` from a folder that is not the agent's, in an
    environment with none of the agent's variables but the API key (redacted at capture, so
    the user supplies it)."""
    done = subprocess.run(
        [
            *(SANDBOX, "replay", run_id, "--store", str(store.root), "--times", str(times)),
            *("--json", *extra),
        ],
        env=dict(env if env is not None else base_env(OPENAI_API_KEY=API_KEY)),
        cwd=cwd or store.root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    start = done.stdout.find("{\n")
    assert start >= 0, done.stdout + done.stderr
    return Replayed(done.returncode, json.loads(done.stdout[start:]), done.stdout + done.stderr)


def assert_reproduced_every_time(result: Replayed, times: int = TIMES) -> None:
    """N/N reproduced, frozen clocks, the recorded entrypoint (no ``--entrypoint``)."""
    assert result.exit_code == 1, result.output
    assert (result.reproduced, result.total) == (times, times), result.output
    assert result.report["clocks"] == "frozen"
    assert result.report["mismatch"] is None, result.output


@contextlib.contextmanager
def model(script: _model.Script) -> Iterator[str]:
    """The scripted model; yields its base URL (``OPENAI_BASE_URL``)."""
    with _model.scripted_model(script) as client:
        yield str(client.base_url)


@contextlib.contextmanager
def service(handler: Handler, name: str) -> Iterator[str]:
    """A JSON service on 127.0.0.1; yields its base URL."""
    base, stop = _model.serve_http(handler, name)
    try:
        yield base
    finally:
        stop()


def prompts(events: list[Event]) -> list[str]:
    """Every message content the agent sent the model, in order."""
    return [
        str(m.get("content"))
        for e in events
        if isinstance(e, LLMCall)
        for m in e.messages
        if isinstance(m, dict)
    ]


def replayed_runs(store: DirectoryStore, result: Replayed) -> list[list[Event]]:
    return [store.load_events(run) for run in result.report["replays"]]
