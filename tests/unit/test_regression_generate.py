"""``sandbox pytest``'s generator: valid, ruff-clean, injection-proof Python that fails while
the failure reproduces and passes once it does not (a real replay of a captured agent with no
services, run in a pytest subprocess)."""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.errors import RegressionError, SandboxError
from sandbox.regress import regression_source, regression_test_name, write_regression_test
from sandbox.snapshot.manifest import (
    Entrypoint,
    Failure,
    Manifest,
    ServiceState,
    SQLInvariant,
)
from sandbox.snapshot.store import DirectoryStore

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '"""\nimport os; os.system("rm -rf /")  # \\ \x00 \u2028 \'\'\' {x} \r\n"""'


def manifest(
    run_id: str = "orders-20240301T120000Z-1a2b3c",
    *,
    name: str = "orders agent",
    reason: str = "order placed twice after a committed timeout",
    services: bool = True,
) -> Manifest:
    return Manifest(
        run_id=run_id,
        name=name,
        created=datetime(2024, 3, 1, 12, tzinfo=UTC),
        status="complete",
        entrypoint=Entrypoint(kind="callable", target="examples.orders:run"),
        services=[ServiceState(name="db", kind="postgres")] if services else [],
        failure=Failure(
            reason=reason,
            predicate=SQLInvariant(
                service="db", query="SELECT sku FROM orders GROUP BY sku HAVING count(*) > 1"
            ),
        ),
    )


def constants(source: str) -> dict[str, object]:
    tree = ast.parse(source)
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }


def test_source_is_valid_python_naming_the_run_and_failure() -> None:
    source = regression_source(manifest(), store="../../snapshots", times=5)
    code = compile(source, "test_x.py", "exec")
    assert code is not None
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    assert doc is not None
    assert "orders-20240301T120000Z-1a2b3c" in doc
    assert "order placed twice after a committed timeout" in doc
    assert "SELECT sku FROM orders" in doc and "db (postgres)" in doc
    assert "it fails while the\nbug is present, and when a run could not be judged" in doc
    assert constants(source) == {
        "RUN_ID": "orders-20240301T120000Z-1a2b3c",
        "FAILURE": "order placed twice after a committed timeout",
        "TIMES": 5,
        "ENTRYPOINT": None,
        "STORE": "../../snapshots",
        "PREDICATE": None,
        "TIMEOUT": None,
        "POLICIES": (),
        "MISS": "fail",
    }
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions == ["_store_path", "test_replay_orders_20240301t120000z_1a2b3c"]
    assert 'assert verdict.outcome != "inconclusive", summary' in source
    assert 'assert verdict.outcome == "gone", summary' in source
    assert "@pytest.mark.docker" in source


def test_hostile_manifest_text_cannot_inject_code() -> None:
    source = regression_source(manifest(name=HOSTILE, reason=HOSTILE), store=HOSTILE)
    tree = ast.parse(source)
    kinds = [type(n).__name__ for n in tree.body]
    assert kinds == (
        ["Expr", "ImportFrom", "Import", "ImportFrom", "Import"]
        + ["ImportFrom"] * 3
        + ["Assign"] * 9
        + ["FunctionDef", "FunctionDef"]
    )
    values = constants(source)
    assert values["FAILURE"] == HOSTILE and values["STORE"] == HOSTILE
    assert "os.system" in (ast.get_docstring(tree) or "")


def test_the_replay_policies_enter_the_test_as_data() -> None:
    """``sandbox pytest --live/--recorded/--miss``: the rules and the miss mode are literals
    the test replays with; an unknown policy or kind is refused when the file is written."""
    source = regression_source(
        manifest(), store="s", rules=["recorded=tool", "live=http:127.0.0.1:*"], miss="live"
    )
    values = constants(source)
    assert values["POLICIES"] == ("recorded=tool", "live=http:127.0.0.1:*")
    assert values["MISS"] == "live"
    assert "policies=PolicySet.from_rules(POLICIES)," in source
    assert "miss=MissMode.parse(MISS)," in source
    assert "recorded=tool, live=http:127.0.0.1:*, miss=live" in (
        ast.get_docstring(ast.parse(source)) or ""
    )
    assert constants(regression_source(manifest(), store="s", rules=["live=tool"]))["POLICIES"] == (
        "live=tool",
    )
    with pytest.raises(SandboxError, match="boundary kind"):
        regression_source(manifest(), store="s", rules=["live=nonsense"])
    with pytest.raises(SandboxError, match="miss mode"):
        regression_source(manifest(), store="s", miss="sometimes")


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=300), reason=st.text(max_size=300))
def test_any_text_stays_data(name: str, reason: str) -> None:
    source = regression_source(manifest(name=name, reason=reason or "x"), store="s")
    tree = ast.parse(source)
    assert constants(source)["FAILURE"] == (reason or "x")
    assert sum(isinstance(n, ast.FunctionDef) for n in tree.body) == 2
    assert isinstance(tree.body[0], ast.Expr)


@pytest.mark.parametrize(
    ("run_id", "expected"),
    [
        ("orders-1", "test_replay_orders_1"),
        ("a.b-c_d", "test_replay_a_b_c_d"),
        ("---", "test_replay_run"),
        ("9lives", "test_replay_9lives"),
    ],
)
def test_regression_test_name(run_id: str, expected: str) -> None:
    assert regression_test_name(run_id) == expected


def test_written_file_is_ruff_clean_with_store_relative_to_it(tmp_path: Path) -> None:
    store = tmp_path / "snapshots"
    out = write_regression_test(
        tmp_path / "tests" / "regressions" / "test_orders.py",
        manifest(
            name=HOSTILE + "\\" * 300 + "\u0430" * 90 + "😀",
            reason="x" * 400 + HOSTILE + '"' * 5,
        ),
        store=store,
        times=3,
        entrypoint="examples.orders_fixed:run",
        timeout=45,
    )
    assert constants(out.read_text())["STORE"] == "../../snapshots"
    assert constants(out.read_text())["TIMEOUT"] == 45.0
    ruff = Path(sys.executable).parent / "ruff"
    config = ["--config", str(ROOT / "pyproject.toml")]
    check = subprocess.run(
        [str(ruff), "check", *config, str(out)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = subprocess.run(
        [str(ruff), "format", "--check", *config, str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    with pytest.raises(RegressionError, match="exists"):
        write_regression_test(out, manifest(), store=store)
    with pytest.raises(RegressionError, match=r"\.py"):
        write_regression_test(tmp_path / "t.txt", manifest(), store=store)


AGENT = """
from sandbox import capture

ORDERS = []


@capture.tool
def place_order(sku: str) -> int:
    ORDERS.append(sku)
    return len(ORDERS)


def run() -> dict[str, int]:
    \"\"\"The bug: the order is placed again after it went through.\"\"\"
    ORDERS.clear()
    place_order("A-1")
    place_order("A-1")
    return {"orders": len(ORDERS)}


def run_fixed() -> dict[str, int]:
    ORDERS.clear()
    place_order("A-1")
    return {"orders": len(ORDERS)}


def run_crash() -> dict[str, int]:
    ORDERS.clear()
    raise KeyError("PRICING_URL")
"""


@pytest.fixture
def captured_agent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    """A tiny agent (no services) captured for real: it places the same order twice."""
    from sandbox import capture
    from sandbox.snapshot.manifest import ResultPredicate
    from sandbox.snapshot.store import DirectoryStore

    pytester.makepyfile(dupagent=AGENT)
    monkeypatch.syspath_prepend(str(pytester.path))
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))  # for the test run in a subprocess
    import dupagent

    store = DirectoryStore(pytester.path / "snapshots")
    target = Entrypoint(kind="callable", target="dupagent:run")
    with capture.run("dup", store=store, seed=1, entrypoint=target, packages=False) as rec:
        rec.set_result(dupagent.run())
        rec.mark_failed("order placed twice", ResultPredicate(path="orders", op="gt", value=1))
    return rec.run_id


@pytest.mark.parametrize(
    ("entrypoint", "expected"),
    [
        (None, "*order placed twice: failure reproduced: 2/2 runs (0 gone, 0 inconclusive)*"),
        ("dupagent:run_fixed", None),
        ("dupagent:run_crash", "*: could not judge: 0/2 runs reproduced (0 gone, 2 inconclusive*"),
    ],
)
def test_generated_test_fails_before_the_fix_and_passes_after(
    pytester: pytest.Pytester, captured_agent: str, entrypoint: str | None, expected: str | None
) -> None:
    """With a real replay (in a pytest subprocess, so nothing leaks into this one) of a
    captured agent: the generated test fails against the buggy agent, passes against the
    fixed one, and fails when the runs cannot be judged (here a KeyError)."""
    store = DirectoryStore(pytester.path / "snapshots")
    write_regression_test(
        pytester.path / "tests" / "test_dup.py",
        store.load_manifest(captured_agent),
        store=store.root,
        times=2,
        entrypoint=entrypoint,
    )
    before = {m.run_id for m in store.list()}
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests/test_dup.py")
    if expected is None:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([expected])
    replays = [m for m in store.list() if m.run_id not in before]
    assert len(replays) == 2 and all(m.replay_of == captured_agent for m in replays)
