"""Masking rules on the command line and in a TOML file reach the services a captured
program connects to (found by discovery: here a SQLite file)."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from cli.main import main
from sandbox.errors import MaskRuleError
from sandbox.services.masking import load_mask_file, parse_mask_options
from sandbox.services.registry import get_kind
from sandbox.snapshot.store import DirectoryStore

EMAIL = "kim.lee@example.com"
AGENT = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1])
    conn.execute("INSERT INTO users (email, token) VALUES ('new@example.com', 'tok')")
    conn.commit()
    """
)


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "app.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, token TEXT)")
        conn.execute("INSERT INTO users (email, token) VALUES (?, 'secret-token-1')", (EMAIL,))
    (tmp_path / "agent.py").write_text(AGENT)
    return db


@pytest.mark.parametrize("how", ["option", "file"])
def test_masks_reach_a_service_found_at_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    db = _db(tmp_path)
    store = DirectoryStore(tmp_path / "store")
    if how == "option":
        masks = ["--mask", "sqlite:users.email=hash", "--mask", "sqlite:users.token=null"]
    else:
        rules = tmp_path / "masks.toml"
        rules.write_text('[mask.sqlite]\n"users.email" = "hash"\n"users.token" = "null"\n')
        masks = ["--mask-file", str(rules)]
    argv = ["capture", "--name", "m", "--store", str(store.root), *masks, "--"]
    code = main([*argv, sys.executable, str(tmp_path / "agent.py"), str(db)])
    assert code == 0, capsys.readouterr().err
    (manifest,) = store.list()
    (state,) = manifest.services
    assert state.kind == "sqlite" and state.before is not None and state.after is not None
    for ref in (state.before, state.after):
        data = store.get_blob(ref.sha256)
        assert EMAIL.encode() not in data and b"secret-token-1" not in data
    restored = tmp_path / "restored.sqlite"
    get_kind("sqlite").restore(str(restored), store.get_blob(state.after.sha256))
    with sqlite3.connect(restored) as conn:
        rows = conn.execute("SELECT email, token FROM users ORDER BY id").fetchall()
    assert len(rows) == 2 and all(str(e).startswith("mask_") and t is None for e, t in rows)


def test_bad_rules_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MaskRuleError, match="expected SERVICE:TARGET=METHOD"):
        parse_mask_options(["users.email=hash"])
    bad = tmp_path / "bad.toml"
    bad.write_text("[mask.db\n")
    with pytest.raises(MaskRuleError, match="not valid TOML"):
        load_mask_file(bad)
    assert parse_mask_options(["db:public.users.email=hash"]) == {
        "db": {"public.users.email": "hash"}
    }
