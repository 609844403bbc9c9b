"""A service found at capture whose bookkeeping fails (the run's folder gone under it) does
not fail the agent's connection: the capture fails open, the run is marked damaged."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from sandbox import capture
from sandbox.snapshot.store import DirectoryStore


def test_a_failing_discovery_leaves_the_agents_connection_alone(tmp_path: Path) -> None:
    live = tmp_path / "shop.db"
    with sqlite3.connect(live) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.close()
    store = DirectoryStore(tmp_path / "store")
    with capture.run("shop", store=store, services="auto", packages=False) as rec:
        shutil.rmtree(store.run_dir(rec.run_id))  # the manifest cannot be written any more
        with sqlite3.connect(live) as conn:
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (0,)
        conn.close()
        assert rec.damaged is not None
