"""The must-show, with real containers: a regression test written by ``sandbox pytest`` for
the captured ``orders`` failure fails against the buggy agent and passes against its fix."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import main as sandbox_main
from sandbox.names import STORE_ENV
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
INI = """
[pytest]
markers =
    docker: needs a running Docker engine
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DirectoryStore, str]]:
    from examples.capture_demo import capture_orders

    store = DirectoryStore(tmp_path_factory.mktemp("orders-store"))
    yield store, capture_orders(store)


def _repo_runs() -> set[str]:
    """The runs in the repository's store (the readable ones: a test of the committed copy
    plants an empty run folder there for a moment, and may while this one runs)."""
    return {m.run_id for m in DirectoryStore(ROOT / "snapshots").list()}


@pytest.mark.parametrize(
    ("entrypoint", "passes"), [(None, False), ("examples.orders:main_fixed", True)]
)
def test_generated_test_fails_on_the_bug_and_passes_on_the_fix(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    captured: tuple[DirectoryStore, str],
    entrypoint: str | None,
    passes: bool,
) -> None:
    store, run_id = captured
    monkeypatch.delenv(STORE_ENV, raising=False)  # the file must find the store by itself
    before = _repo_runs()
    out = pytester.path / "tests" / "test_orders_regression.py"
    argv = ["pytest", run_id, "-o", str(out), "--store", str(store.root), "--times", "2"]
    if entrypoint is not None:
        argv += ["--entrypoint", entrypoint]
    assert sandbox_main(argv) == 0

    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(out.read_text()).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert values["RUN_ID"] == run_id and values["ENTRYPOINT"] == entrypoint
    assert (out.parent / str(values["STORE"])).resolve() == store.root.resolve()
    replays_before = {m.run_id for m in store.list() if m.replay_of == run_id}

    pytester.makeini(INI)
    result = pytester.runpytest("-p", "no:cacheprovider", str(out))
    if passes:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["*the same order was inserted twice: failure reproduced: 2/2 runs (0 gone, *"]
        )

    replays = {m.run_id for m in store.list() if m.replay_of == run_id} - replays_before
    assert len(replays) == 2  # the generated test replayed from the tmp store
    assert _repo_runs() == before  # and wrote nothing into the repository's store
