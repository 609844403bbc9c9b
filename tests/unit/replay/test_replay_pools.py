"""The agent's SQLAlchemy engines drop their pools before each replayed run
(:mod:`sandbox.replay.isolation.pools`), and the capture's SQLAlchemy hook is installed
whenever the agent first imports SQLAlchemy, inside a run too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import sqlalchemy

from sandbox.replay.isolation.pools import let_go_of_pools

ROOT = Path(__file__).resolve().parents[3]


class _Gone:
    pass


def test_an_engine_drops_its_pool_and_a_dead_weak_proxy_is_passed_over() -> None:
    engine = sqlalchemy.create_engine("sqlite://")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text("SELECT 1"))
    pool = engine.pool
    gone = _Gone()
    proxy = weakref.proxy(gone)
    del gone  # the proxy is dead: asking it for its class would raise ReferenceError
    try:
        assert let_go_of_pools() >= 1
        assert engine.pool is not pool  # a new pool: new connections, routed afresh
    finally:
        del proxy
        engine.dispose()


SCRIPT = textwrap.dedent(
    """
    import sys
    from sandbox import capture

    with capture.run("import-inside", store=sys.argv[1], packages=False):
        import sqlalchemy  # first imported inside the run: the hooks patch it as it loads

        engine = sqlalchemy.create_engine("sqlite://")
        with engine.connect() as conn:
            print(conn.execute(sqlalchemy.text("SELECT 41 + 1")).scalar_one())
    """
)


def test_sqlalchemy_first_imported_inside_a_run_imports_and_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "store")],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42"]
    assert "sandbox:" not in done.stderr  # no capture warning: nothing failed
