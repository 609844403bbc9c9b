"""The sqlite service kind: backup-API capture, atomic restore, logical hash."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sandbox.errors import ServiceError
from sandbox.services import get_kind
from sandbox.services.sqlite import db_path


def _make(path: Path, rows: list[tuple[object, ...]], *, wal: bool = False) -> str:
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT, r REAL, b BLOB)")
    conn.execute("CREATE INDEX t_v ON t (v)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return str(path)


ROWS = [(1, "a", 1.5, b"\x00\xff"), (2, None, None, None), (3, "c", -0.1, b"")]


def test_restore_to_a_new_file_gives_the_same_hash(tmp_path: Path) -> None:
    kind = get_kind("sqlite")
    src = _make(tmp_path / "a.db", ROWS)
    captured = kind.capture(src)
    assert captured.data.startswith(b"SQLite format 3\x00")
    assert captured.version == sqlite3.sqlite_version
    target = str(tmp_path / "nested" / "b.db")
    kind.restore(target, captured.data)
    assert kind.state_hash(target) == captured.state_hash == kind.state_hash(src)
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == ROWS
        assert conn.execute("SELECT seq FROM sqlite_sequence").fetchone() == (3,)
    conn.close()


def test_hash_is_logical(tmp_path: Path) -> None:
    kind = get_kind("sqlite")
    a = _make(tmp_path / "a.db", ROWS)
    b = _make(tmp_path / "b.db", list(reversed(ROWS)))
    with sqlite3.connect(b) as conn:  # free pages and a different layout
        conn.execute("CREATE TABLE junk (x)")
        conn.executemany("INSERT INTO junk VALUES (?)", [("x" * 500,)] * 50)
        conn.execute("DROP TABLE junk")
    conn.close()
    assert kind.state_hash(a) == kind.state_hash(b)
    with sqlite3.connect(b) as conn:
        conn.execute("UPDATE t SET r = 1.5000001 WHERE id = 1")
    conn.close()
    assert kind.state_hash(a) != kind.state_hash(b)


def test_restore_discards_a_stale_wal(tmp_path: Path) -> None:
    kind = get_kind("sqlite")
    path = _make(tmp_path / "w.db", ROWS, wal=True)
    captured = kind.capture(path)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO t (v) VALUES ('only in the wal')")
    writer.commit()
    assert Path(path + "-wal").stat().st_size > 0
    # Closing merges and removes the WAL: copy it aside first and put it back after.
    wal = Path(path + "-wal").read_bytes()
    writer.close()
    Path(path + "-wal").write_bytes(wal)
    kind.restore(path, captured.data)
    assert kind.state_hash(path) == captured.state_hash


def test_reset_returns_to_the_mark(tmp_path: Path) -> None:
    kind = get_kind("sqlite")
    path = _make(tmp_path / "r.db", ROWS)
    with pytest.raises(ServiceError, match="mark_restore_point"):
        kind.reset(path)
    original = kind.state_hash(path)
    kind.mark_restore_point(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM t")
    conn.close()
    kind.reset(path)
    assert kind.state_hash(path) == original


def test_errors_are_clear(tmp_path: Path) -> None:
    kind = get_kind("sqlite")
    with pytest.raises(ServiceError, match="does not exist"):
        kind.capture(str(tmp_path / "missing.db"))
    assert not (tmp_path / "missing.db").exists(), "capture never creates the file"
    with pytest.raises(ServiceError, match="not an SQLite database"):
        kind.restore(str(tmp_path / "x.db"), b"hello")
    with pytest.raises(ServiceError, match="sqlite:/// URL"):
        db_path("postgres://x/y")


def test_sqlite_urls() -> None:
    assert db_path("sqlite:///app.db") == Path("app.db")
    assert db_path("sqlite:////abs/app.db") == Path("/abs/app.db")
    assert db_path("data/app.db") == Path("data/app.db")
