"""A SQLite file found at capture (``capture.run(services="auto")``, nothing declared) is
captured before the agent's first connection; on replay the agent's connections to it, by
sqlite3 or by a SQLAlchemy engine, go to the restored copy and the user's file is untouched."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy

from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

DB = {"path": "", "client": "sqlite3"}


def agent() -> None:
    """Places an order; fails when one was placed already (a duplicate)."""
    if DB["client"] == "sqlalchemy":
        engine = sqlalchemy.create_engine(f"sqlite:///{DB['path']}")
        with engine.begin() as conn:
            before = conn.execute(sqlalchemy.text("SELECT count(*) FROM orders")).scalar()
            conn.execute(sqlalchemy.text("INSERT INTO orders (sku) VALUES ('sku-1')"))
        engine.dispose()
    else:
        with sqlite3.connect(DB["path"]) as conn:
            before = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
            conn.execute("INSERT INTO orders (sku) VALUES ('sku-1')")
        conn.close()
    if before:
        raise RuntimeError(f"duplicate order ({before} already placed)")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("client", ["sqlite3", "sqlalchemy"])
def test_found_sqlite_is_captured_and_replays_leave_the_users_file_alone(
    tmp_path: Path, client: str
) -> None:
    live = tmp_path / "shop.db"
    with sqlite3.connect(live) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, sku TEXT)")
        conn.execute("INSERT INTO orders (sku) VALUES ('sku-1')")
    conn.close()
    DB.update(path=str(live), client=client)
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:agent")
    with (
        pytest.raises(RuntimeError, match="duplicate"),
        capture.run("shop", store=store, services="auto", entrypoint=entry, packages=False) as rec,
    ):
        agent()
    manifest = store.load_manifest(rec.run_id)
    (state,) = manifest.services
    assert (state.name, state.kind) == ("sqlite", "sqlite")
    assert state.hash_before != state.hash_after  # captured before the insert, and after
    (touched,) = manifest.touched
    assert (touched.endpoint, touched.clients, touched.service) == (
        str(live),
        ["sqlite3"],
        "sqlite",
    )

    before = _digest(live)
    report = replay(rec.run_id, store=store, times=3)
    assert report.refused == []
    assert report.verdict.reproduced == 3
    assert _digest(live) == before
    with sqlite3.connect(live) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 2
    conn.close()


def test_a_file_the_agent_creates_is_captured_empty_before_its_first_connection(
    tmp_path: Path,
) -> None:
    """A database file that does not exist yet is made empty for the capture before the
    agent's first connection (as its ``sqlite3.connect`` would): its state before is an
    empty database, after holds what the agent wrote."""
    from sandbox.services.registry import get_kind

    live = tmp_path / "new.db"
    store = DirectoryStore(tmp_path / "store")
    with capture.run("new", store=store, services="auto", packages=False) as rec:
        with sqlite3.connect(live) as conn:
            conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, sku TEXT)")
        conn.close()
    (state,) = store.load_manifest(rec.run_id).services
    assert state.kind == "sqlite" and state.before is not None and state.after is not None
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert state.hash_before == get_kind("sqlite").state_hash(str(empty))
    assert state.hash_after != state.hash_before
