"""The corpus' harness: its scripts (``agents/``) copied into a test's folder and captured
there as people do, replayed with ``sandbox replay RUN --json`` from another folder; a fix
is an edit to the script, and so is a crash.

Two ways to capture, on one script: **zero-code**, the script unchanged, run as ``sandbox
capture --name N [--fail-if ...] -- python agent.py``; and **decorator**, the script as a
user who opens the capture in it writes it (``from sandbox import capture`` with the other
imports, ``@capture.run(N, store="snapshots")`` on its ``main``, sync or async, and, where
the failure is no exception, the lines that mark the run failed, as ``--fail-if`` does for
a command), run as ``python agent.py``. Either way the run lands in the script's folder,
``snapshots/``. A module of the corpus that a test captures in-process (``with
capture.run(..., entrypoint=...)``) is captured zero-code as ``sandbox capture -- python -m
MODULE`` (:func:`capture_module`)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness

AGENTS = Path(__file__).parent / "agents"


def copy_agents(folder: Path) -> None:
    """The corpus' scripts copied into ``folder`` (a script the test wrote there is kept)."""
    for path in AGENTS.iterdir():
        if path.suffix == ".py" and not (folder / path.name).exists():
            shutil.copy(path, folder)


def capture(
    folder: Path, agent: str, env: dict[str, str], *extra: str, python: str = sys.executable
) -> harness.Captured:
    """``sandbox capture --name AGENT -- python AGENT.py`` in ``folder``."""
    copy_agents(folder)
    store = DirectoryStore(folder / "snapshots")
    command = ["--", python, f"{agent}.py"]
    done = subprocess.run(
        [harness.SANDBOX, "capture", "--store", str(store.root), "--name", agent, *extra, *command],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = [line for line in done.stderr.splitlines() if "captured run " in line]
    assert found, done.stdout + done.stderr
    run_id = found[-1].split("captured run ")[1].split()[0]
    return harness.Captured(store, run_id, done.returncode, done.stdout + done.stderr)


def edit(folder: Path, agent: str, old: str, new: str) -> None:
    path = folder / f"{agent}.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def assert_gone(result: harness.Replayed) -> None:
    assert result.exit_code == 0, result.output
    assert result.report["verdict"]["gone"] == result.total, result.output


def assert_inconclusive(result: harness.Replayed, reason: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.report["verdict"]["inconclusive"] == result.total, result.output
    assert reason in result.output


def model_env(base: str) -> dict[str, str]:
    return harness.base_env(OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY)


STYLES = ("zero-code", "decorator")
ROOT = Path(__file__).resolve().parents[3]
_MAIN = re.compile(r"(async )?def main\(")


def decorate(source: str, name: str, *, mark: str = "") -> str:
    """``source`` with ``@capture.run(NAME, store="snapshots")`` on its ``main`` and its
    import; ``mark`` (lines of code) appended to ``main``'s body."""
    lines = source.splitlines()
    first = next(
        node.lineno - 1
        for node in ast.parse(source).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
    )
    lines.insert(first, "from sandbox import capture")
    main = next(i for i, line in enumerate(lines) if _MAIN.match(line))
    lines.insert(main, f'@capture.run({name!r}, store="snapshots")')
    if mark:
        end = next(
            (i for i in range(main + 2, len(lines)) if lines[i] and not lines[i][0].isspace()),
            len(lines),
        )
        while not lines[end - 1].strip():
            end -= 1
        body = textwrap.indent(textwrap.dedent(mark).strip("\n"), "    ").splitlines()
        lines[end:end] = body
    return "\n".join(lines) + "\n"


def captured(
    style: str,
    folder: Path,
    agent: str,
    env: dict[str, str],
    *,
    fail_if: str | None = None,
    mark: str = "",
    python: str = sys.executable,
) -> harness.Captured:
    """``agents/AGENT.py`` (or ``folder/AGENT.py`` when the test wrote it there) captured
    in ``folder`` in ``style``: zero-code with ``fail_if``, decorated with ``mark``."""
    if style == "zero-code":
        extra = ("--fail-if", fail_if) if fail_if else ()
        return capture(folder, agent, env, *extra, python=python)
    copy_agents(folder)
    script = folder / f"{agent}.py"
    script.write_text(decorate(script.read_text(), agent, mark=mark))
    done = subprocess.run(
        [python, script.name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    store = DirectoryStore(folder / "snapshots")
    runs = sorted(store.runs_dir.iterdir()) if store.runs_dir.is_dir() else []
    assert len(runs) == 1, done.stdout + done.stderr
    return harness.Captured(store, runs[0].name, done.returncode, done.stdout + done.stderr)


def capture_module(
    store: DirectoryStore,
    name: str,
    module: str,
    env: Mapping[str, str],
    *,
    fail_if: str | None = None,
) -> harness.Captured:
    """A module of the corpus captured zero-code, from the repository's root: ``sandbox
    capture --name NAME [--fail-if F] -- python -m MODULE``."""
    extra = ("--fail-if", fail_if) if fail_if else ()
    command = [sys.executable, "-m", module]
    return harness.capture(store, name, env, command=command, extra=extra, cwd=ROOT)
