"""Masking in a files workspace and a SQLite database: what is captured is masked, the live
state is not, and the masked state restores."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sandbox import capture
from sandbox.services.masking import capture_masked
from sandbox.services.registry import get_kind
from sandbox.snapshot.store import DirectoryStore

KEY = b"k" * 32
EMAIL = "jane.doe@example.org"
TOKEN = "ghp_" + "Zz09" * 9


def test_workspace_files_matching_a_glob_are_masked_in_the_capture(
    store: DirectoryStore, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "contacts.md").write_text(f"owner: {EMAIL}\ndeploy token {TOKEN}\n")
    (docs / "secret.env").write_text(f"TOKEN={TOKEN}\n")
    (docs / "readme.txt").write_text("plain\n")
    spec = capture.ServiceSpec(
        "docs", "files", str(docs), env="DOCS", mask={"*.md": "redact", "*.env": "null"}
    )
    with capture.run("masked", store=store, seed=1, services=[spec], cwd=str(tmp_path)) as rec:
        (docs / "contacts.md").write_text(f"owner: {EMAIL} (changed)\n")
    state = store.load_manifest(rec.run_id).services[0]
    assert state.before is not None and state.after is not None
    for ref in (state.before, state.after):
        data = store.get_blob(ref.sha256)
        assert EMAIL.encode() not in data and TOKEN.encode() not in data
    restored = tmp_path / "restored"
    get_kind("files").restore(str(restored), store.get_blob(state.before.sha256))
    text = (restored / "contacts.md").read_text()
    assert text.startswith("owner: <email:") and "deploy token <redacted:" in text
    assert (restored / "secret.env").read_text() == ""
    assert (restored / "readme.txt").read_text() == "plain\n"
    assert get_kind("files").state_hash(str(restored)) == state.hash_before
    assert EMAIL in (docs / "contacts.md").read_text()  # the live workspace is not masked


def test_sqlite_columns_are_masked(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, note TEXT)")
        conn.execute("INSERT INTO users VALUES (1, ?, 'hi'), (2, ?, 'yo')", (EMAIL, EMAIL))
    state = capture_masked("sqlite", str(db), {"users.email": "hash", "users.note": "null"}, KEY)
    assert EMAIL.encode() not in state.data
    out = tmp_path / "back.sqlite"
    get_kind("sqlite").restore(str(out), state.data)
    with sqlite3.connect(out) as conn:
        rows = conn.execute("SELECT email, note FROM users ORDER BY id").fetchall()
    assert rows[0] == rows[1] and rows[0][1] is None and str(rows[0][0]).startswith("mask_")
