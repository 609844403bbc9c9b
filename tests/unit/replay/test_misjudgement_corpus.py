"""The misjudgement corpus: replays that cannot be judged are never "the failure is gone".

One small agent (``desk.py``, written the way the README shows: the real ``openai`` client
against the scripted model server, a pricing service over real HTTP, ``@capture.run``) quotes
a price in cents as dollars. Each case below replays it through the ``sandbox`` command in a
subprocess, as a user would, and must give exit 2 (could not judge) or 3 (internal error),
never 0 or 1; where a report can be written its badge is amber, and the test that guards the
fix fails with the reason instead of passing:

- a different exception on replay (an attempted fix that raises ValueError);
- a missing environment variable (a fix that reads ``DESK_CURRENCY``, set nowhere);
- a live dependency that is down (``--live http`` with the pricing service stopped);
- a prompt-only edit (the model request changed: a recording mismatch), every one of N runs;
- a forced internal error (the store cannot create the replay's run);
- an agent that catches its own error and makes none of the recorded calls;
- a live tool that raises a KeyError the agent catches, where the recorded call returned;
- a crash with a predicate that cannot be checked (the crash is the reason);
- an entrypoint whose module fails as it is imported.

A fix on a shorter path (fewer of the recorded calls) is still gone, its coverage shown, and
``sandbox pytest`` and ``sandbox explain`` take the replay's policy options.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples._model import serve_http
from sandbox.snapshot.store import DirectoryStore

REPO = Path(__file__).resolve().parents[3]
SANDBOX = Path(sys.executable).parent / "sandbox"

DESK = textwrap.dedent(
    """
    import os

    import httpx

    from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
    from sandbox import capture

    SYSTEM = "You answer price questions. Use the price tool."
    TOOLS = [tool_spec("price", "The price of a product.", {"sku": {"type": "string"}})]


    def script(messages):
        results = last_tool_results(messages)
        if results:
            return {"content": f"The widget costs {results[0]} dollars."}
        return {"tool_calls": [{"name": "price", "arguments": {"sku": "W1"}}]}


    @capture.tool
    def price(sku: str) -> int:
        url = os.environ["PRICING_URL"]
        return httpx.post(f"{url}/quote", json={"sku": sku}, timeout=5).json()["cents"]


    def ask(system: str) -> dict:
        with scripted_model(script) as client:
            answer = agent_loop(client, system, "How much is the widget?", TOOLS, {"price": price})
        return {"answer": answer}


    @capture.run("quotes", store="snapshots", seed=3)
    def main() -> dict:
        result = ask(SYSTEM)
        capture.result(result)
        capture.mark_failed(
            "a price in cents quoted as dollars",
            capture.ResultPredicate(path="answer", op="contains", value="1299 dollars"),
        )
        return result


    def main_parses_badly() -> dict:  # an attempted fix with a bug of its own
        result = ask(SYSTEM)
        dollars = float(result["answer"].split()[3].replace("$", "")) / 100
        return {"answer": f"The widget costs {dollars:.2f} dollars.", "check": int("12.99")}


    def main_needs_env() -> dict:  # a fix that needs a variable nobody set
        currency = os.environ["DESK_CURRENCY"]
        return {"answer": ask(SYSTEM)["answer"] + currency}


    def main_prompt_edit() -> dict:  # a prompt-only edit: the bug stays
        return ask(SYSTEM + " Be brief.")


    def main_apologises() -> dict:  # catches its own error, makes no call, answers politely
        try:
            currency = os.environ["DESK_CURRENCY"]
        except KeyError:
            return {"answer": "Sorry, I cannot quote prices right now."}
        return {"answer": ask(SYSTEM)["answer"] + currency}


    @capture.tool("price")
    def price_converted(sku: str) -> int:  # reads a variable nobody set
        rate = float(os.environ["DESK_CURRENCY"])
        return int(price(sku) * rate)


    def main_catches_tool_error() -> dict:  # the tool raises where it returned at capture
        try:
            with scripted_model(script) as client:
                tools = {"price": price_converted}
                answer = agent_loop(client, SYSTEM, "How much is the widget?", TOOLS, tools)
        except KeyError:
            answer = "Sorry, I cannot quote prices right now."
        return {"answer": answer}


    def main_quotes_directly() -> dict:  # the fix, on a shorter path: no model call
        return {"answer": f"The widget costs {price('W1') / 100:.2f} dollars."}
    """
)
DESK_IMPORT = textwrap.dedent(
    """
    import os

    from desk import main

    CURRENCY = os.environ["DESK_CURRENCY"]  # read at import: set nowhere
    """
)


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """The project folder, the captured run, and the (stopped) pricing service's URL."""
    project = tmp_path_factory.mktemp("desk")
    (project / "desk.py").write_text(DESK)
    (project / "desk_import.py").write_text(DESK_IMPORT)
    url, stop = serve_http(lambda path, body: (200, {"cents": 1299}), "pricing")
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import desk; desk.main()"],
            cwd=project,
            env=environment(url),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop()  # from here on the pricing service is down
    assert done.returncode == 0, done.stderr
    (run,) = DirectoryStore(project / "snapshots").list()
    assert run.failure is not None and run.failure.observed
    yield project, run.run_id, url


def environment(pricing_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DESK_CURRENCY"}
    env["PRICING_URL"] = pricing_url
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH")] if p)
    return env


def sandbox(desk: tuple[Path, str, str], *args: str) -> subprocess.CompletedProcess[str]:
    project, _, url = desk
    return subprocess.run(
        [str(SANDBOX), *args],
        cwd=project,
        env=environment(url),
        capture_output=True,
        text=True,
        timeout=300,
    )


def judged(desk: tuple[Path, str, str], name: str, *options: str) -> dict[str, object]:
    """Replay through the CLI: exit 2, JSON verdict inconclusive, amber report."""
    project, run_id, _ = desk
    page = project / f"{name}.html"
    done = sandbox(
        desk, "replay", run_id, "--times", "2", "--json", "--report", str(page), *options
    )
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = json.loads(done.stdout)["verdict"]
    assert verdict["outcome"] == "inconclusive" and verdict["reproduced"] == 0
    assert verdict["gone"] == 0
    html = page.read_text()
    assert 'class="verdict inconclusive"' in html and "could not judge" in html
    assert "verdict gone" not in html and "verdict reproduced" not in html
    return verdict  # type: ignore[no-any-return]


def generated_test_fails(desk: tuple[Path, str, str], name: str, *options: str) -> str:
    """``sandbox pytest`` writes the guard test; run, it fails (never passes)."""
    project, run_id, _ = desk
    out = project / "tests" / f"test_{name}.py"
    made = sandbox(desk, "pytest", run_id, "-o", str(out), "--force", *options)
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
        cwd=project,
        env=environment(desk[2]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # 1: a test failed
    assert "1 failed" in done.stdout, done.stdout
    return done.stdout


def test_a_different_exception(desk: tuple[Path, str, str]) -> None:
    verdict = judged(desk, "other-exception", "--entrypoint", "desk:main_parses_badly")
    runs = verdict["runs"]
    assert isinstance(runs, list) and {r["reason"] for r in runs} == {"exception"}
    assert "ValueError" in runs[0]["detail"]
    out = generated_test_fails(desk, "other_exception", "--entrypoint", "desk:main_parses_badly")
    assert "could not judge" in out and "ValueError" in out


def test_a_missing_environment_variable(desk: tuple[Path, str, str]) -> None:
    verdict = judged(desk, "missing-env", "--entrypoint", "desk:main_needs_env")
    runs = verdict["runs"]
    assert isinstance(runs, list) and runs[0]["reason"] == "exception"
    assert "a missing environment variable (DESK_CURRENCY is not set)" in runs[0]["detail"]
    out = generated_test_fails(desk, "missing_env", "--entrypoint", "desk:main_needs_env")
    assert "DESK_CURRENCY is not set" in out


def test_a_live_dependency_that_is_down(desk: tuple[Path, str, str]) -> None:
    verdict = judged(desk, "dependency-down", "--live", "http")
    runs = verdict["runs"]
    assert isinstance(runs, list) and runs[0]["reason"] == "exception"
    assert "httpx.ConnectError" in runs[0]["detail"]
    assert "a live dependency refused the connection" in runs[0]["detail"]
    # a hand-written guard through the pytest plugin's replay fixture fails with the reason
    project, run_id, _ = desk
    guard = project / "tests" / "test_guard_live.py"
    guard.parent.mkdir(exist_ok=True)
    guard.write_text(
        textwrap.dedent(
            f"""
            from sandbox.replay import PolicySet


            def test_fixed(replay):
                report = replay({run_id!r}, policies=PolicySet().with_rule("live", "http"))
                assert report.verdict.exit_code == 0
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(guard)],
        cwd=project,
        env={**environment(desk[2]), "SANDBOX_STORE": str(project / "snapshots")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
    assert "a live dependency refused the connection" in done.stdout


def test_a_prompt_only_edit(desk: tuple[Path, str, str]) -> None:
    """Every one of the N runs is replayed and judged, not the first alone."""
    verdict = judged(desk, "prompt-edit", "--entrypoint", "desk:main_prompt_edit", "--times", "3")
    runs = verdict["runs"]
    assert isinstance(runs, list) and [r["reason"] for r in runs] == ["mismatch"] * 3
    assert verdict["total"] == 3 and verdict["inconclusive"] == 3
    out = generated_test_fails(desk, "prompt_edit", "--entrypoint", "desk:main_prompt_edit")
    assert "recording mismatch" in out


def test_a_forced_internal_error(desk: tuple[Path, str, str], tmp_path: Path) -> None:
    """The store cannot create the replay's run (its scratch folder is a file): exit 3 with one
    line naming the traceback file, and the guard test fails."""
    project, run_id, url = desk
    broken = tmp_path / "project"
    shutil.copytree(project, broken, ignore=shutil.ignore_patterns("*.html", "tests"))
    shutil.rmtree(broken / "snapshots" / ".tmp", ignore_errors=True)
    out = broken / "tests" / "test_internal.py"
    made = sandbox((broken, run_id, url), "pytest", run_id, "-o", str(out))
    assert made.returncode == 0, made.stderr
    (broken / "snapshots" / ".tmp").write_text("not a folder")

    done = sandbox((broken, run_id, url), "replay", run_id)
    assert done.returncode == 3, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("sandbox: internal error (a bug): FileExistsError")
    crash = Path(line.rsplit("traceback in ", 1)[1])
    assert "Traceback" in crash.read_text()
    crash.unlink()

    test = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
        cwd=broken,
        env=environment(url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert test.returncode == 1 and "1 failed" in test.stdout, test.stdout + test.stderr
    assert "FileExistsError" in test.stdout


def test_an_agent_that_apologises_exercised_nothing(desk: tuple[Path, str, str]) -> None:
    """It catches its own KeyError, makes none of the recorded calls and answers politely:
    not "gone" but inconclusive, its coverage 0 of the recorded calls."""
    verdict = judged(desk, "apologises", "--entrypoint", "desk:main_apologises")
    runs = verdict["runs"]
    assert isinstance(runs, list) and {r["reason"] for r in runs} == {"unexercised"}
    assert "the replay exercised nothing of the recorded run" in runs[0]["detail"]
    assert runs[0]["coverage"] == {"made": 0, "recorded": 3, "state": []}
    assert verdict["coverage"] == {"made": 0, "recorded": 3, "state": []}
    out = generated_test_fails(desk, "apologises", "--entrypoint", "desk:main_apologises")
    assert "exercised nothing" in out and "recorded calls made: 0/3" in out
    # the pytest plugin's replay fixture reads the same verdict: the guard fails
    project, run_id, _ = desk
    guard = project / "tests" / "test_guard_apologises.py"
    guard.write_text(
        textwrap.dedent(
            f"""
            def test_fixed(replay):
                report = replay({run_id!r}, entrypoint="desk:main_apologises")
                assert report.verdict.exit_code == 0
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(guard)],
        cwd=project,
        env={**environment(desk[2]), "SANDBOX_STORE": str(project / "snapshots")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
    assert "the replay exercised nothing of the recorded run" in done.stdout


def test_a_caught_key_error_at_a_recorded_call(desk: tuple[Path, str, str]) -> None:
    """The live tool raises KeyError where the recorded call returned; the agent catches it
    and answers politely: inconclusive, the KeyError named."""
    verdict = judged(desk, "caught", "--entrypoint", "desk:main_catches_tool_error")
    runs = verdict["runs"]
    assert isinstance(runs, list) and {r["reason"] for r in runs} == {"exception"}
    detail = runs[0]["detail"]
    assert "the agent caught KeyError: 'DESK_CURRENCY'" in detail
    assert "(DESK_CURRENCY is not set)" in detail and "raised by tool price #1" in detail
    assert runs[0]["raised"] and runs[0]["coverage"] == {"made": 2, "recorded": 3, "state": []}


def test_a_fix_on_a_shorter_path_is_gone_with_its_coverage(desk: tuple[Path, str, str]) -> None:
    """A fix that quotes the recorded price without asking the model: gone (exit 0), the
    coverage shown; the generated guard test, with the same policy, passes."""
    project, run_id, _ = desk
    fix = ("--entrypoint", "desk:main_quotes_directly", "--recorded", "tool")
    done = sandbox(desk, "replay", run_id, "--times", "2", "--json", *fix)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(done.stdout)["verdict"]
    assert verdict["outcome"] == "gone" and verdict["gone"] == 2
    assert [r["coverage"] for r in verdict["runs"]] == [{"made": 1, "recorded": 3, "state": []}] * 2
    assert "(1/3 recorded calls made)" in verdict["runs"][0]["detail"]
    shown = sandbox(desk, "replay", run_id, *fix)
    assert shown.returncode == 0
    assert "recorded calls made: 1/3" in shown.stdout.replace("\n", " ")

    out = project / "tests" / "test_short_fix.py"
    made = sandbox(desk, "pytest", run_id, "-o", str(out), "--force", *fix)
    assert made.returncode == 0, made.stderr
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
        cwd=project,
        env=environment(desk[2]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr


def test_a_crash_outranks_a_predicate_that_cannot_be_checked(desk: tuple[Path, str, str]) -> None:
    """The agent crashes on a missing variable; the SQL predicate has no service to run on:
    the reason is the crash, not the predicate."""
    verdict = judged(
        desk,
        "crash-sql",
        "--entrypoint",
        "desk:main_needs_env",
        "--predicate",
        "sql:sqlite=SELECT 1",
    )
    runs = verdict["runs"]
    assert isinstance(runs, list) and {r["reason"] for r in runs} == {"exception"}
    assert "KeyError: 'DESK_CURRENCY'" in runs[0]["detail"]
    assert "(DESK_CURRENCY is not set)" in runs[0]["detail"]


def test_an_entrypoint_that_fails_at_import_is_inconclusive(desk: tuple[Path, str, str]) -> None:
    """The module reads a variable nobody set as it is imported: exit 2 with the KeyError
    named, not an internal error."""
    verdict = judged(desk, "import-crash", "--entrypoint", "desk_import:main")
    runs = verdict["runs"]
    assert isinstance(runs, list) and {r["reason"] for r in runs} == {"exception"}
    assert "KeyError: 'DESK_CURRENCY'" in runs[0]["detail"]
    assert "(DESK_CURRENCY is not set)" in runs[0]["detail"]


def test_explain_takes_the_replay_policy_options_and_a_predicate(
    desk: tuple[Path, str, str],
) -> None:
    """The pricing service is down: with the tool served from the recording the failure
    reproduces (the search runs, exit 1); judged by a predicate that never holds, it does not
    (nothing to explain, exit 2)."""
    _, run_id, _ = desk
    base = ("explain", run_id, "--times", "1", "--budget", "6", "--json", "--recorded", "tool")
    held = sandbox(desk, *base, "--miss", "fail")
    assert held.returncode == 1, held.stdout + held.stderr
    assert json.loads(held.stdout)["status"] in {"explained", "incomplete"}
    never = sandbox(desk, *base, "--predicate", "result:answer contains no such text")
    assert never.returncode == 2, never.stdout + never.stderr
    assert json.loads(never.stdout)["status"] == "not reproduced"
