"""describe / describe_data of the file-based kinds, and end-state diffs built from them."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from sandbox.replay.judging.endstate import end_state_diffs
from sandbox.services import capture_end_state, capture_service, get_kind
from sandbox.services.base import TRUNCATED
from sandbox.snapshot.store import DirectoryStore


def _sql(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    try:
        with conn:
            for stmt in statements:
                conn.execute(stmt)
    finally:
        conn.close()


def test_sqlite_describe_orders_rows_by_primary_key(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    _sql(
        db,
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INT, blob BLOB)",
        "INSERT INTO orders VALUES (10, 'b', 1, NULL)",
        "INSERT INTO orders VALUES (2, 'a', 2, x'ff00')",
        "CREATE TABLE log (line TEXT)",
        "INSERT INTO log VALUES ('z'), ('a'), (NULL)",
    )
    kind = get_kind("sqlite")
    assert kind.describe(str(db)) == {
        "tables": {
            "log": [{"line": None}, {"line": "a"}, {"line": "z"}],
            "orders": [
                {"id": 2, "item": "a", "qty": 2, "blob": {"base64": "/wA="}},
                {"id": 10, "item": "b", "qty": 1, "blob": None},
            ],
        }
    }
    cut = kind.describe(str(db), limit=1)
    assert cut["tables"] == {
        "log": [{"line": None}],
        "orders": [{"id": 2, "item": "a", "qty": 2, "blob": {"base64": "/wA="}}],
    }
    assert cut[TRUNCATED] == {"log": 3, "orders": 2}


def test_sqlite_describe_data_leaves_the_endpoint_alone(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    _sql(db, "CREATE TABLE t (x)", "INSERT INTO t VALUES (1)")
    kind = get_kind("sqlite")
    data = kind.capture(str(db)).data
    _sql(db, "INSERT INTO t VALUES (2)")
    assert kind.describe_data(str(db), data) == {"tables": {"t": [{"x": 1}]}}
    assert kind.describe(str(db)) == {"tables": {"t": [{"x": 1}, {"x": 2}]}}


def test_files_describe_and_describe_data(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "out").mkdir(parents=True)
    (root / "out" / "report.txt").write_text("hello")
    (root / "notes.md").write_text("n")
    (root / "notes.md").chmod(0o600)
    (root / "out").chmod(0o755)
    (root / "out" / "report.txt").chmod(0o644)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ignored")
    kind = get_kind("files")
    data = kind.capture(str(root)).data
    described = kind.describe(str(root))
    assert described == {
        "files": {
            "notes.md": {
                "mode": "0600",
                "sha256": hashlib.sha256(b"n").hexdigest(),
                "size": 1,
            },
            "out": {"mode": "0755", "dir": True},
            "out/report.txt": {
                "mode": "0644",
                "sha256": hashlib.sha256(b"hello").hexdigest(),
                "size": 5,
            },
        }
    }
    (root / "out" / "report.txt").write_text("changed")
    assert kind.describe_data(str(root), data) == described
    assert kind.describe(str(root), limit=2)[TRUNCATED] == {"files": 3}


def test_end_state_diffs_name_rows_and_files(tmp_path: Path, store: DirectoryStore) -> None:
    db = tmp_path / "app.db"
    _sql(db, "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a")
    recorded = [
        capture_service("sqlite", "db", str(db), store),
        capture_service("files", "ws", str(ws), store),
    ]
    # The original run: two orders (one a duplicate) and a new file.
    _sql(db, "INSERT INTO orders VALUES (1, 'widget')", "INSERT INTO orders VALUES (2, 'widget')")
    (ws / "b.txt").write_text("b")
    endpoints = {"db": str(db), "ws": str(ws)}
    recorded = [capture_end_state(s, endpoints[s.name], store) for s in recorded]

    # The replay: restored, then one order only, and a different file content.
    for state in recorded:
        assert state.before is not None
        get_kind(state.kind).restore(endpoints[state.name], store.get_blob(state.before.sha256))
    _sql(db, "INSERT INTO orders VALUES (1, 'widget')")
    (ws / "b.txt").write_text("B")
    replayed = [
        s.model_copy(
            update={"after": None, "hash_after": get_kind(s.kind).state_hash(endpoints[s.name])}
        )
        for s in recorded
    ]
    diffs = end_state_diffs(store, recorded, replayed, endpoints)
    assert [(d.service, d.path, d.status) for d in diffs] == [
        ("db", "tables.orders[1]", "missing"),
        ("ws", 'files["b.txt"].sha256', "changed"),
    ]
    assert diffs[0].expected == {"id": 2, "item": "widget"}
    assert "tables.orders[1]: removed" in diffs[0].describe()

    # Equal end states: nothing to report; an unreadable endpoint: the hash diff stays.
    assert end_state_diffs(store, recorded, recorded, endpoints) == []
    gone = end_state_diffs(store, recorded, replayed, {"db": str(tmp_path / "nope.db")})
    assert [(d.service, d.path) for d in gone] == [("db", ""), ("ws", "")]
    assert gone[0].expected == recorded[0].hash_after
