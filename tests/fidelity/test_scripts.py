"""The capture API used from scripts, as the README shows it: the decorator example run as
``python shop.py`` and the context-manager form run as a script record their command line as
the entrypoint (``python shop.py``, ``python -m checkout_block``), and replay as they are (no
``--entrypoint``); inside the replay, the capture hands over to it. A program that signals
its failure only by its exit code is captured with ``--fail-if 'exit!=0'``."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness


def _run_script(tmp_path: Path, agent: str, *args: str, **env: str) -> tuple[DirectoryStore, str]:
    """Run ``python AGENT.py`` (or ``python ARGS``) in ``tmp_path``; return its run."""
    shutil.copy(harness.AGENTS / f"{agent}.py", tmp_path)
    args = args or (f"{agent}.py",)
    done = subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        env=harness.base_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    store = DirectoryStore(tmp_path / "snapshots")
    (run,) = [p.name for p in store.runs_dir.iterdir()]
    manifest = store.load_manifest(run)
    assert manifest.failure is not None, done.stderr
    assert manifest.entrypoint is not None
    assert manifest.entrypoint.kind == "command"
    assert manifest.entrypoint.command[1:] == list(args)
    return store, run


def test_readme_decorator_example_run_as_a_script_replays(tmp_path: Path) -> None:
    store, run = _run_script(tmp_path, "shop")

    result = harness.replay(store, run)

    harness.assert_reproduced_every_time(result)


def test_a_script_that_draws_as_it_imports_replays_the_draws_of_its_run(tmp_path: Path) -> None:
    """``raffle.py`` draws from the global ``random`` and makes a ``uuid4`` as it is imported,
    then its decorated (async) ``main`` picks a winner and a ticket. The capture seeded the
    run's generators when ``main`` entered ``capture.run``, after those draws; the replay
    does the same there (not as the interpreter starts), so the winner and the ticket, and
    so the recorded failure's message, come back; the seeding and the failure are recorded
    in ``main``'s task, as they were (no divergence)."""
    store, run = _run_script(tmp_path, "raffle")

    result = harness.replay(store, run, times=2)

    harness.assert_reproduced_every_time(result, times=2)
    assert result.report["divergences"] == [None, None], result.report["divergences"]


def test_a_scripts_thread_pool_temp_folder_and_text_body_replay_as_its_runs(
    tmp_path: Path,
) -> None:
    """``pool_quotes.py``'s decorated ``main`` asks for its quotes through a thread pool,
    writes a draft in a new temporary folder and posts its order as JSON in a plain-text
    body. Replayed as its command with the suppliers stopped: reproduced 2/2 with no
    divergence (before: the pool's requests were not the run's in the replayed program and
    were refused; its first temporary folder drew a name the capture's process had drawn
    before the run; the order, recorded as text, matched no request sent as JSON)."""

    def suppliers(path: str, body: dict[str, object]) -> tuple[int, object]:
        return 200, {"price": 0 if path.startswith("/south") else 12.5, "path": path}

    with harness.service(suppliers, "suppliers") as url:
        store, run = _run_script(tmp_path, "pool_quotes", SUPPLIER_URL=url)
    assert "south quoted 0: ordered for nothing" in str(store.load_manifest(run).failure)

    result = harness.replay(store, run, times=2)

    harness.assert_reproduced_every_time(result, times=2)
    assert result.report["divergences"] == [None, None], result.report["divergences"]


@pytest.mark.parametrize("args", [("checkout_block.py",), ("-m", "checkout_block")])
def test_context_manager_run_as_a_script_replays(tmp_path: Path, args: tuple[str, ...]) -> None:
    ids = itertools.count(1)

    def orders(path: str, body: dict[str, object]) -> tuple[int, object]:
        return 201, {"id": next(ids), **body}

    with harness.service(orders, "orders") as url:
        store, run = _run_script(tmp_path, "checkout_block", *args, ORDERS_URL=url)
    assert "order placed twice: 1 and 2" in str(store.load_manifest(run).failure)

    result = harness.replay(store, run, None, "--recorded", "tool")

    harness.assert_reproduced_every_time(result)


def test_exit_code_only_failure_replays(store: DirectoryStore) -> None:
    def supplier(path: str, body: dict[str, object]) -> tuple[int, object]:
        return 200, {"prices": [{"sku": "A1", "price": 4.5}, {"sku": "B2", "price": 0}]}

    with harness.service(supplier, "supplier") as url:
        run = harness.capture(
            store, "price_sync", harness.base_env(SUPPLIER_URL=url), extra=("--fail-if", "exit!=0")
        )
    assert run.exit_code == 3 and run.manifest.failure is not None, run.output

    result = harness.replay(store, run.run_id)

    harness.assert_reproduced_every_time(result)
