"""The example workflow, ``.github/workflows/replay.yml``, run here: every job of its matrix
runs its steps in order, in a fresh copy of the repository (the files git tracks), with each
``run:`` command as written (``${{ matrix.shard }}`` substituted, ``if:`` conditions evaluated,
``sudo`` dropped when running as root).

The GitHub actions it uses are stood in for: ``actions/checkout`` is the copy;
``actions/setup-python`` and ``make setup`` are this interpreter's venv, linked into the copy
(it is current for the same ``pyproject.toml``, so ``make`` keeps it, and the copy's code is
what it imports); ``actions/upload-artifact`` runs on failure only, so its inputs are checked:
the folder it keeps is the one ``ci-repro --report-dir`` wrote a page into for every run of
the shard. The project holds one regression test, generated as the workflow's comment says
(``sandbox pytest RUN -o tests/regressions/...``, for the fixed entrypoint), so that the
regression step runs too.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.capture_demo import DEMO_RUN_ID
from sandbox.regress.check import select_runs
from sandbox.regress.shard import Shard
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "replay.yml"
EMULATED = {"actions/checkout", "actions/setup-python", "actions/upload-artifact"}
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_STATUS = {"success()", "failure()", "always()", "cancelled()"}


def _value(term: str, shard: int, root: Path) -> str:
    """One operand of an ``if:`` condition, as the string GitHub compares."""
    term = term.strip()
    if term == "matrix.shard":
        return str(shard)
    if re.fullmatch(r"-?\d+", term):
        return term
    if quoted := re.fullmatch(r"'([^']*)'", term):
        return quoted[1]
    if files := re.fullmatch(r"hashFiles\('([^']+)'\)", term):
        # a hash of the files the pattern matches, '' when it matches none
        found = sorted(p for p in root.glob(files[1]) if p.is_file())
        if not found:
            return ""
        return hashlib.sha256(b"".join(p.read_bytes() for p in found)).hexdigest()
    raise AssertionError(f"this test cannot evaluate {term!r} in the workflow: teach it")


def _condition(text: str | None, shard: int, root: Path) -> bool:
    """A step's ``if:`` while no step has failed: ``&&`` of ``==``/``!=`` comparisons and
    status functions (without one, GitHub adds ``success()``)."""
    if text is None:
        return True
    text = _EXPRESSION.sub(lambda m: m[1], str(text)).strip()
    clauses = [c.strip() for c in text.split("&&")]
    if not any(c in _STATUS for c in clauses):
        clauses.append("success()")
    for clause in clauses:
        if clause in _STATUS:
            holds = clause in {"success()", "always()"}
        else:
            compared = re.fullmatch(r"(.+?)\s*(==|!=)\s*(.+)", clause)
            if compared is None or "||" in clause:
                raise AssertionError(f"this test cannot evaluate {clause!r}: teach it")
            left, right = _value(compared[1], shard, root), _value(compared[3], shard, root)
            holds = (left == right) == (compared[2] == "==")
        if not holds:
            return False
    return True


def _command(run: str, shard: int, sudo: str) -> str:
    """A ``run:`` script with its expressions substituted and ``sudo`` as this host needs."""

    def substitute(match: re.Match[str]) -> str:
        if match[1] != "matrix.shard":
            raise AssertionError(f"this test cannot substitute {match[0]!r}: teach it")
        return str(shard)

    return re.sub(r"\bsudo\s+", sudo, _EXPRESSION.sub(substitute, run))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _checkout(dest: Path) -> None:
    """What ``actions/checkout`` gives: the files git tracks (as the working tree has them,
    so that the images built from this checkout are the copy's too)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():  # not a file: deleted, the deletion not committed yet
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)  # keeps the mtime: make compares it


def _environment(workflow: dict[str, Any], job: dict[str, Any], copy: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTEST_", "MAKE", "MFLAGS"))
        and name not in {"VIRTUAL_ENV", "PYTHONPATH", "SANDBOX_STORE", "COLUMNS"}
    }
    for scope in (workflow, job):
        env.update({k: str(v) for k, v in (scope.get("env") or {}).items()})
    # the venv is an editable install of the repository it was made in: the copy comes first
    env["PYTHONPATH"] = str(copy)
    return env


def _sudo() -> str:
    if os.geteuid() == 0:
        return ""
    if subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0:
        return "sudo -n "
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail("the workflow's base-image step needs root or sudo without a password")
    pytest.skip("the workflow's base-image step needs root or sudo without a password")


def _run_job(
    workflow: dict[str, Any], job: dict[str, Any], shard: int, copy: Path, sudo: str
) -> tuple[list[str], str, dict[str, Any]]:
    """Run the job's steps for one matrix value in ``copy``: the names of the steps that ran,
    the ``--shard`` its ci-repro step replayed, and the upload step."""
    env = _environment(workflow, job, copy)
    ran: list[str] = []
    shards: list[str] = []
    for index, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or step["run"]
        if not _condition(step.get("if"), shard, copy):
            continue
        if "uses" in step:
            action = step["uses"].split("@", 1)[0]
            assert action in EMULATED, f"step {name!r}: this test does not stand in for it"
            if action == "actions/checkout":
                assert index == 0, "checkout comes first: the other steps run in the checkout"
                _checkout(copy)
                _add_regression_test(copy, env)
            elif action == "actions/setup-python":
                wanted = str(step["with"]["python-version"])
                project = tomllib.loads((copy / "pyproject.toml").read_text())["project"]
                least = project["requires-python"].removeprefix(">=")
                assert _version(wanted) >= _version(least), f"{wanted}: {least} at least"
                (copy / ".venv").symlink_to(sys.prefix, target_is_directory=True)
            # actions/upload-artifact: what it keeps is checked once the job is done
            ran.append(name)
            continue
        command = _command(step["run"], shard, sudo)
        shards += re.findall(r"\bSHARD=(\S+)", command)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", command],
            cwd=copy,
            env={**env, **{k: str(v) for k, v in (step.get("env") or {}).items()}},
            capture_output=True,
            text=True,
            check=False,
        )
        output = "\n".join((done.stdout + done.stderr).strip().splitlines()[-40:])
        assert done.returncode == 0, (
            f"shard {shard}, step {name!r} exited {done.returncode}:\n$ {command}\n{output}"
        )
        ran.append(name)
    (upload,) = [s for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
    assert len(shards) == 1, f"one ci-repro step with SHARD=I/N per job, found {shards}"
    return ran, shards[0], upload


def _add_regression_test(copy: Path, env: dict[str, str]) -> None:
    """A regression test for the demo's captured failure, as `sandbox pytest` writes it, for
    the fixed entrypoint (it passes: the failure is gone there)."""
    done = subprocess.run(
        [
            str(Path(sys.prefix) / "bin" / "sandbox"),
            "pytest",
            DEMO_RUN_ID,
            "--store",
            "snapshots",
            "--entrypoint",
            "examples.orders:main_fixed",
            "-o",
            "tests/regressions/test_demo_orders.py",
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(900)
def test_the_example_workflow_runs_green_here(tmp_path: Path) -> None:
    """Every matrix job of the example workflow runs its steps' commands with exit 0 in a
    fresh copy of the repository; the shards' ci-repro steps together replay every captured
    failure once, each writing its page where the upload step looks; the regression step
    runs in shard 1 only."""
    stamp = Path(sys.prefix) / ".installed"
    assert stamp.is_file() and stamp.stat().st_mtime >= (REPO / "pyproject.toml").stat().st_mtime, (
        "run the tests from the venv `make setup` made (and keeps current)"
    )
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the copy is made of the files git tracks")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (job,) = workflow["jobs"].values()
    matrix = job["strategy"]["matrix"]
    assert set(matrix) == {"shard"}, f"this test knows the shard matrix only, not {matrix}"
    sudo = _sudo()

    (regression,) = [s["name"] for s in job["steps"] if "tests/regressions" in s.get("run", "")]
    captured: set[str] = set()
    replayed: dict[str, set[str]] = {}
    for shard in matrix["shard"]:
        copy = tmp_path / f"shard-{shard}"
        copy.mkdir()
        ran, spec, upload = _run_job(workflow, job, shard, copy, sudo)
        assert (regression in ran) == (shard == 1), f"shard {shard} ran {ran}"

        # What the upload step keeps, had the job failed: the page of every run of the shard.
        here = {m.run_id for m in select_runs(DirectoryStore(copy / "snapshots"))}
        captured = captured or here
        assert here == captured and DEMO_RUN_ID in captured
        mine = {r for r in captured if Shard.parse(spec).holds(r)}
        kept = copy / upload["with"]["path"]
        pages = {p.stem for p in kept.glob("*.html")} if kept.is_dir() else set()
        assert pages == mine, f"shard {spec}: pages {sorted(pages)}, runs {sorted(mine)}"
        for run in mine:
            assert run in (kept / f"{run}.html").read_text()
        replayed[spec] = mine

    everything = [run for runs in replayed.values() for run in runs]
    assert sorted(everything) == sorted(captured), "the shards replay every failure once"
