"""capture_service / capture_end_state: dumps become blobs, the manifest gets a ServiceState."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sandbox.errors import UnknownNameError
from sandbox.services import capture_end_state, capture_service, get_kind
from sandbox.services.statecapture import redact_endpoint
from sandbox.snapshot.manifest import ServiceState
from sandbox.snapshot.store import DirectoryStore


def test_capture_before_and_after(tmp_path: Path, store: DirectoryStore) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    state = capture_service("sqlite", "appdb", str(db), store, binding_env="APP_DB")
    assert state.kind == "sqlite" and state.name == "appdb"
    assert state.binding.env == "APP_DB" and state.binding.value == str(db)
    assert state.version == sqlite3.sqlite_version
    assert state.before is not None and state.after is None
    assert state.hash_before == get_kind("sqlite").state_hash(str(db))
    blob = store.get_verified_blob(state.before.sha256)
    assert state.before.media_type == "application/vnd.sqlite3"

    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO t VALUES (2)")
    conn.close()
    end = capture_end_state(state, str(db), store)
    assert end.before == state.before and end.hash_before == state.hash_before
    assert end.after is not None and end.hash_after != state.hash_before
    assert ServiceState.model_validate_json(end.model_dump_json()) == end

    # The stored blob restores the state it was captured from.
    get_kind("sqlite").restore(str(db), blob)
    assert get_kind("sqlite").state_hash(str(db)) == state.hash_before


def test_unknown_kind_lists_the_valid_ones(store: DirectoryStore) -> None:
    with pytest.raises(UnknownNameError, match="files, mysql, postgres, redis, sqlite"):
        capture_service("mongo", "db", "mongodb://x", store)


def test_redact_endpoint() -> None:
    assert redact_endpoint("postgresql://app:s3cret@db:5432/shop") == (
        "postgresql://app:***@db:5432/shop"
    )
    assert redact_endpoint("redis://:pw@cache:6379/0") == "redis://:***@cache:6379/0"
    assert redact_endpoint("postgresql://app@db/shop") == "postgresql://app@db/shop"
    assert redact_endpoint("/srv/space") == "/srv/space"


def test_a_touched_capture_of_a_kind_without_it_says_which_kinds_have_it(
    tmp_path: Path, store: DirectoryStore
) -> None:
    import sqlite3

    from sandbox.services.statecapture import begin_service_capture

    sqlite3.connect(tmp_path / "app.db").close()
    service, pinned = begin_service_capture(
        "sqlite", "db", str(tmp_path / "app.db"), store, None, state="touched"
    )
    assert pinned is None
    note = str(service.meta["note"])
    assert note.startswith("the sqlite kind captures its whole state (touched: ")
    named = set(note.rpartition(": ")[2].rstrip(")").split(", "))
    assert named == {"files", "postgres", "redis"}
