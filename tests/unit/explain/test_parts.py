"""The parts of a service's state a trial removes: files of a workspace, SQLite tables'
rows (real folders and databases, no Docker)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sandbox.errors import ServiceError
from sandbox.explain.parts import EVERYTHING, MAX_PARTS, parts_of, remove


def test_files_are_parts_and_removed_ones_are_gone(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a")
    (tmp_path / "b.md").write_text("b")
    assert parts_of("files", str(tmp_path)) == ["file b.md", "file docs/a.md"]
    remove("files", str(tmp_path), ["file docs/a.md"])
    assert parts_of("files", str(tmp_path)) == ["file b.md"]
    with pytest.raises(ServiceError, match="outside the workspace"):
        remove("files", str(tmp_path), ["file ../escape.md"])


def test_a_large_workspace_is_one_part(tmp_path: Path) -> None:
    for i in range(MAX_PARTS + 1):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    assert parts_of("files", str(tmp_path)) == [EVERYTHING]
    remove("files", str(tmp_path), [EVERYTHING])
    assert parts_of("files", str(tmp_path)) == []


def test_sqlite_tables_with_rows_are_parts(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE stock (item TEXT PRIMARY KEY, qty INT)")
        conn.execute("CREATE TABLE log (line TEXT)")
        conn.execute("INSERT INTO stock VALUES ('widget', 10)")
    conn.close()
    assert parts_of("sqlite", str(db)) == ["table stock"]
    remove("sqlite", str(db), ["table stock"])
    assert parts_of("sqlite", str(db)) == []
    with sqlite3.connect(db) as conn:  # the schema is kept
        assert conn.execute("SELECT count(*) FROM stock").fetchone() == (0,)
    conn.close()


def test_a_kind_without_parts_keeps_its_state() -> None:
    assert parts_of("unknown-kind", "anywhere") == []
    remove("unknown-kind", "anywhere", ["table x"])  # nothing to do, no error
