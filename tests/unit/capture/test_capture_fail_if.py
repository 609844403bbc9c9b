"""``sandbox capture --fail-if``: a program that signals its failure only by its exit code
(or by the exception that ends it) is captured with a predicate, judged at capture, and
replayed; ``sandbox replay --predicate`` and ``sandbox pytest --predicate`` replace it."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from cli.main import main
from sandbox.snapshot.manifest import ExceptionPredicate, ExitCodePredicate
from sandbox.snapshot.store import DirectoryStore

SYNC = textwrap.dedent(
    """
    import json, os, sys
    orders = json.loads(os.environ.get("ORDERS", '["A1", "A1"]'))
    duplicates = len(orders) - len(set(orders))
    if sys.argv[1] == "raise" and duplicates:
        raise KeyError("A1")
    print("synced", len(orders), "orders")
    sys.exit(3 if duplicates else 0)
    """
)


@pytest.fixture
def sync(tmp_path: Path) -> Path:
    path = tmp_path / "sync.py"
    path.write_text(SYNC)
    return path


def capture(store: DirectoryStore, program: Path, fail_if: str, mode: str = "exit") -> int:
    return main(
        [
            *("capture", "--name", "sync", "--store", str(store.root)),
            *("--fail-if", fail_if, "--", sys.executable, str(program), mode),
        ]
    )


def only_run(store: DirectoryStore) -> str:
    (manifest,) = store.list()
    return manifest.run_id


def test_exit_code_failure_is_captured_and_reproduces(
    store: DirectoryStore, sync: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert capture(store, sync, "exit!=0") == 3  # the program's own exit code
    assert "(failed, exit code 3)" in capsys.readouterr().err
    run_id = only_run(store)
    failure = store.load_manifest(run_id).failure
    assert failure is not None and failure.observed
    assert failure.predicate == ExitCodePredicate(op="ne", value=0)
    assert failure.reason == "exit code 3 (ne 0)"

    assert main(["replay", run_id, "--times", "2", "--store", str(store.root)]) == 1
    assert "failure reproduced: 2/2 runs" in capsys.readouterr().out


def test_predicate_replaced_on_replay(
    store: DirectoryStore, sync: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A predicate that does not hold on a run that exited non-zero is not "gone": the exit
    code is not explained, so the run could not be judged."""
    capture(store, sync, "exit!=0")
    run_id = only_run(store)
    args = ["replay", run_id, "--store", str(store.root), "--json"]
    assert main([*args, "--predicate", "exit==3"]) == 1
    capsys.readouterr()
    assert main([*args, "--predicate", "exit==4"]) == 2
    out = capsys.readouterr().out
    assert '"reason": "exit"' in out and "exited with code 3" in out
    assert main([*args, "--predicate", "exit~4"]) == 2
    assert "predicate 'exit~4'" in capsys.readouterr().err


def test_not_observed_when_the_predicate_does_not_hold(
    store: DirectoryStore, sync: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS", '["A1", "B2"]')
    assert capture(store, sync, "exit!=0") == 0
    failure = store.load_manifest(only_run(store)).failure
    assert failure is not None and not failure.observed
    assert failure.reason == "not observed: exit code 0 (ne 0)"


def test_exception_predicate_at_capture(store: DirectoryStore, sync: Path) -> None:
    assert capture(store, sync, "exception=KeyError", mode="raise") == 1
    failure = store.load_manifest(only_run(store)).failure
    assert failure is not None and failure.observed
    assert failure.predicate == ExceptionPredicate(type="KeyError")
    assert failure.error is not None and failure.error.type == "KeyError"


def test_sql_predicate_on_a_service_the_run_never_used(
    store: DirectoryStore, sync: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The program reached no database: the predicate cannot hold, and the capture says so."""
    assert capture(store, sync, "sql:postgres=SELECT 1") == 3
    assert (
        "--fail-if sql:postgres=SELECT 1: not observed: no service 'postgres' was found "
        "(found: none)" in capsys.readouterr().err
    )
    failure = store.load_manifest(only_run(store)).failure
    assert failure is not None and not failure.observed


def test_pytest_predicate_is_written_as_text(
    store: DirectoryStore, sync: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture(store, sync, "exit!=0")
    run_id = only_run(store)
    out = tmp_path / "test_sync.py"
    assert main(["pytest", run_id, "-o", str(out), "--store", str(store.root),
                 "--predicate", "exit==3"]) == 0  # fmt: skip
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(out.read_text()).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert values["PREDICATE"] == "exit==3"
    assert "Predicate: exit==3" in out.read_text()
