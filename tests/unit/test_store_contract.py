"""The contract every snapshot store backend keeps, run against each backend of
:data:`STORE_BACKENDS` through the :class:`~sandbox.snapshot.store.Store` protocol only.

A new backend is one more entry in :data:`STORE_BACKENDS`: a factory taking the test's
``request`` (for the fixtures it needs, such as a server) and a fresh folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from snapshot_factory import CREATED, build_snapshot

from sandbox.errors import StoreError, UnknownRunError, UnsafePathError
from sandbox.snapshot.events import ClockRead, FinalResult, ToolCall
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.manifest import Entrypoint, Manifest
from sandbox.snapshot.store import DirectoryStore, Store, dump_event, open_store

StoreFactory = Callable[[pytest.FixtureRequest, Path], Store]


def directory_store(request: pytest.FixtureRequest, folder: Path) -> Store:
    return DirectoryStore(folder)


STORE_BACKENDS: list[object] = [
    pytest.param(directory_store, id="directory"),
]
"""Every store backend: add a ``pytest.param(factory, id=...)`` per backend."""


@pytest.fixture(params=STORE_BACKENDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    factory: StoreFactory = request.param
    return factory(request, tmp_path / "store")


def running(run_id: str) -> Manifest:
    return Manifest(
        run_id=run_id,
        name="contract",
        created=CREATED,
        status="running",
        entrypoint=Entrypoint(kind="callable", target="agent:main"),
    )


def test_blobs_are_content_addressed_and_kept_once(any_store: Store) -> None:
    first = any_store.put_blob(b"same bytes", "text/plain")
    again = any_store.put_blob(b"same bytes")
    other = any_store.put_blob(b"other bytes")
    assert first.sha256 == again.sha256 == sha256_bytes(b"same bytes")
    assert (first.size, first.media_type) == (10, "text/plain")
    assert sorted(any_store.iter_blobs()) == sorted([first.sha256, other.sha256])
    assert any_store.get_verified_blob(first.sha256) == b"same bytes"
    with any_store.open_blob(other.sha256) as stream:
        assert stream.read() == b"other bytes"
    any_store.delete_blob(other.sha256)
    any_store.delete_blob(other.sha256)  # absent: nothing happens
    assert not any_store.has_blob(other.sha256)
    assert list(any_store.iter_blobs()) == [first.sha256]
    with pytest.raises(StoreError, match="not in the store"):
        any_store.get_blob(other.sha256)


def test_a_blob_from_a_file_is_added_under_its_key(any_store: Store, tmp_path: Path) -> None:
    source = tmp_path / "dump.sql"
    source.write_bytes(b"CREATE TABLE t (id int);\n" * 100)
    key = sha256_bytes(source.read_bytes())
    any_store.put_blob_file(source, key)
    assert any_store.has_blob(key)
    assert any_store.get_verified_blob(key) == source.read_bytes()


@pytest.mark.parametrize("bad", ["../x", "/abs", "a/b", "..", "", "A" * 64, "g" * 64])
def test_keys_and_run_ids_that_would_escape_are_refused(any_store: Store, bad: str) -> None:
    for blob_op in (any_store.get_blob, any_store.has_blob, any_store.delete_blob):
        with pytest.raises(UnsafePathError):
            blob_op(bad)
    if bad not in {"A" * 64, "g" * 64}:  # those two are valid run ids
        for run_op in (any_store.exists, any_store.load_manifest, any_store.delete):
            with pytest.raises(UnsafePathError):
                run_op(bad)


def test_a_begun_run_appends_as_it_goes_and_finish_seals_it(any_store: Store) -> None:
    writer = any_store.begin(running("live-1"))
    assert any_store.exists("live-1")
    assert any_store.load_manifest("live-1").status == "running"
    writer.append(ClockRead(seq=0, wall=1.0, mono=0.1, value=5.0))
    assert [e.seq for e in any_store.iter_events("live-1")] == [0]  # visible before the end
    writer.close()
    with any_store.resume("live-1") as more:
        more.append(FinalResult(seq=1, wall=2.0, mono=0.2, value="done"))
        sealed = more.finish(running("live-1").model_copy(update={"status": "complete"}))
    assert sealed.event_count == 2
    assert sealed.events_sha256 == sha256_bytes(any_store.read_events_bytes("live-1"))
    assert any_store.load_manifest("live-1") == sealed
    assert [e.kind for e in any_store.load_events("live-1")] == ["clock", "result"]
    with pytest.raises(StoreError, match="already exists"):
        any_store.begin(running("live-1"))


def test_a_whole_run_is_committed_at_once_and_replaced_only_when_asked(
    any_store: Store,
) -> None:
    snapshot = build_snapshot(any_store, "whole-1", save=False)
    assert not any_store.exists("whole-1")
    any_store.save(snapshot)
    loaded = any_store.load("whole-1")
    assert loaded.manifest.event_count == len(snapshot.events)
    assert [e.seq for e in loaded.events] == [e.seq for e in snapshot.events]
    assert all(any_store.has_blob(key) for key in loaded.blob_refs())
    with pytest.raises(StoreError, match="already exists"):
        any_store.save(snapshot)
    shorter = b"".join(dump_event(e) for e in snapshot.events[:2])
    any_store.save_raw(
        snapshot.manifest.model_copy(update={"events_sha256": None, "event_count": None}),
        shorter,
        overwrite=True,
    )
    assert any_store.read_events_bytes("whole-1") == shorter
    assert any_store.load_manifest("whole-1").event_count == 2


def test_events_stream_by_kind_start_and_limit(any_store: Store) -> None:
    build_snapshot(any_store, "stream-1")
    every = list(any_store.iter_events("stream-1"))
    tools = list(any_store.iter_events("stream-1", kinds=["tool"]))
    assert tools and all(isinstance(e, ToolCall) for e in tools)
    assert tools == [e for e in every if e.kind == "tool"]
    assert [e.seq for e in any_store.iter_events("stream-1", start=3, limit=2)] == [3, 4]
    assert list(any_store.iter_events("stream-1", limit=0)) == []


def test_runs_are_listed_by_id_and_by_manifest_and_deleted_whole(any_store: Store) -> None:
    assert any_store.run_ids() == [] and any_store.list() == []
    for run_id in ("b-run", "a-run"):
        build_snapshot(any_store, run_id)
    assert any_store.run_ids() == ["a-run", "b-run"]
    assert [m.run_id for m in any_store.list()] == ["a-run", "b-run"]
    assert any_store.run_bytes("a-run") >= len(any_store.read_manifest_bytes("a-run"))
    any_store.delete("a-run")
    assert any_store.run_ids() == ["b-run"]
    assert not any_store.exists("a-run")
    with pytest.raises(UnknownRunError, match="did you mean b-run"):
        any_store.delete("b")
    with pytest.raises(UnknownRunError):
        any_store.load("a-run")


def test_the_location_reopens_the_same_store(any_store: Store) -> None:
    build_snapshot(any_store, "here-1")
    key = any_store.placeholder_key()
    again = open_store(any_store.location)
    assert again.run_ids() == ["here-1"]
    assert again.placeholder_key() == key and len(key) == 32
