"""The directory store: atomic run folders, paths that cannot escape, blob dedupe, sealing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from snapshot_factory import CREATED, build_snapshot, tree

from sandbox.capture.run import finish_manifest
from sandbox.errors import StoreError, UnknownRunError, UnsafePathError
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot import store as store_module
from sandbox.snapshot.events import BlobRef, ClockRead, Event, LLMCall, ToolCall
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.manifest import ModelInfo, Runtime
from sandbox.snapshot.store import (
    EVENTS,
    MANIFEST,
    PLACEHOLDER_KEY,
    TALLY_BATCH,
    atomic_write,
    dump_event,
    dump_manifest,
    open_store,
    parse_manifest,
)

ESCAPES = ["../x", "/abs", "a/b", "..", ".", "", "a\\b", "x/../../y"]


@pytest.mark.parametrize("bad", ESCAPES)
def test_run_ids_that_would_escape_are_refused(store: DirectoryStore, bad: str) -> None:
    for op in (store.run_dir, store.exists, store.load, store.delete):
        with pytest.raises(UnsafePathError, match="invalid run id"):
            op(bad)


@pytest.mark.parametrize("bad", [*ESCAPES, "A" * 64, "g" * 64, "ab" * 31, "a" * 65])
def test_blob_keys_that_would_escape_are_refused(store: DirectoryStore, bad: str) -> None:
    for op in (store.blob_path, store.get_blob, store.has_blob):
        with pytest.raises(UnsafePathError, match="invalid blob key"):
            op(bad)


def test_blobs_are_deduplicated_by_content(store: DirectoryStore) -> None:
    first = store.put_blob(b"same bytes")
    second = store.put_blob(b"same bytes", "text/plain")
    assert first.sha256 == second.sha256 == sha256_bytes(b"same bytes")
    assert list(store.iter_blobs()) == [first.sha256]
    assert store.get_blob(first.sha256) == b"same bytes"
    other = store.put_blob(b"other bytes")
    assert sorted(store.iter_blobs()) == sorted([first.sha256, other.sha256])


def test_a_failed_save_leaves_no_run_folder(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = build_snapshot(store, "first")
    before = tree(store.root / "runs")

    def broken_rename(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "rename", broken_rename)
    snapshot.manifest = snapshot.manifest.model_copy(update={"run_id": "second"})
    with pytest.raises(OSError, match="disk full"):
        store.save(snapshot)
    monkeypatch.undo()
    assert tree(store.root / "runs") == before
    assert not store.run_dir("second").exists()
    assert list((store.root / ".tmp").iterdir()) == []  # staging was removed


def test_overwrite_replaces_a_run_whole(store: DirectoryStore) -> None:
    snapshot = build_snapshot(store)
    with pytest.raises(StoreError, match="already exists"):
        store.save(snapshot)
    shorter = type(snapshot)(snapshot.manifest, snapshot.events[:3])
    store.save(shorter, overwrite=True)
    assert len(store.load(snapshot.run_id).events) == 3
    assert store.load_manifest(snapshot.run_id).event_count == 3


def test_save_seals_complete_runs_only(store: DirectoryStore) -> None:
    snapshot = build_snapshot(store)
    manifest = store.load_manifest(snapshot.run_id)
    events = store.read_events_bytes(snapshot.run_id)
    assert snapshot.manifest.events_sha256 is None  # filled by the store, not the caller
    assert manifest.events_sha256 == sha256_bytes(events)
    assert manifest.event_count == len(snapshot.events) == 12

    running = Manifest(run_id="live", created=CREATED)
    store.save_raw(running, dump_event(ClockRead(seq=0, wall=0, mono=0, value=1.0)))
    assert store.load_manifest("live").events_sha256 is None
    assert store.load_manifest("live").event_count is None


def test_run_writer_appends_and_finish_seals(store: DirectoryStore) -> None:
    manifest = Manifest(run_id="cap", created=CREATED, pid=os.getpid())
    writer = store.begin(manifest)
    for seq in range(5):
        writer.append(ClockRead(seq=seq, wall=seq, mono=seq, value=float(seq)))
    # every line is on disk before append returns, without closing
    assert (store.run_dir("cap") / EVENTS).read_bytes().count(b"\n") == 5
    sealed = writer.finish(manifest.model_copy(update={"status": "complete"}))
    assert sealed.event_count == 5
    assert sealed.events_sha256 == sha256_bytes((store.run_dir("cap") / EVENTS).read_bytes())
    assert store.load_manifest("cap") == sealed
    assert [e.seq for e in store.load("cap").events] == [0, 1, 2, 3, 4]


def test_begin_refuses_an_existing_run(store: DirectoryStore) -> None:
    build_snapshot(store, "taken")
    with pytest.raises(StoreError, match="already exists"):
        store.begin(Manifest(run_id="taken", created=CREATED))


def test_a_torn_last_line_is_dropped_only_while_running(store: DirectoryStore) -> None:
    line = dump_event(ClockRead(seq=0, wall=0, mono=0, value=1.0))
    store.save_raw(Manifest(run_id="crashed", created=CREATED), line + line[:10])
    assert len(store.load("crashed").events) == 1


def test_unknown_run_suggests_near_ids(store: DirectoryStore) -> None:
    build_snapshot(store, "order-run-1")
    with pytest.raises(UnknownRunError, match="did you mean order-run-1"):
        store.load("order-run")


def test_store_files_are_where_the_layout_says(store: DirectoryStore, tmp_path: Path) -> None:
    snapshot = build_snapshot(store)
    assert (store.root / "runs" / snapshot.run_id / MANIFEST).is_file()
    for key in snapshot.blob_refs():
        assert (store.root / "blobs" / "sha256" / key[:2] / key).is_file()
    # nothing outside the store's root
    assert {p.name for p in tmp_path.iterdir()} == {"store"}


def _mixed_events() -> list[Event]:
    blob = BlobRef(sha256="a" * 64, size=123)
    return [
        ToolCall(seq=0, wall=1, mono=0, name="lookup", output_blob=blob),
        LLMCall(seq=1, wall=1, mono=0, provider="openai", model="m1", params={"t": 0.5}),
        ClockRead(seq=2, wall=1, mono=0, value=1.0),
    ]


def test_a_run_is_sealed_from_what_its_writer_counted(store: DirectoryStore) -> None:
    """A capture seals its run from what the writer counted while appending (no reading the
    log back): the count, the hash, the blobs' bytes and the models are the log's."""
    writer = store.begin(Manifest(run_id="counted", created=CREATED))
    for event in _mixed_events():
        writer.append(event)
    writer.close(durable=False)
    assert writer.tally() is not None
    sealed = finish_manifest(store, writer.manifest, writer, durable=False)
    data = (store.run_dir("counted") / EVENTS).read_bytes()
    assert sealed.event_count == 3
    assert sealed.events_sha256 == sha256_bytes(data)
    assert sealed.blob_bytes == 123
    assert sealed.models == [ModelInfo(provider="openai", model="m1", params={"t": 0.5})]
    assert store.load_manifest("counted") == sealed


def test_a_long_run_is_sealed_from_what_its_writer_counted_in_batches(
    store: DirectoryStore,
) -> None:
    """A log many times longer than what the writer counts at once (its lines are counted a
    batch at a time): the count, the hash, every blob's bytes and every model, in every
    batch, are the log's."""
    writer = store.begin(Manifest(run_id="long", created=CREATED))
    models = []
    for i in range(600):
        blob = BlobRef(sha256=f"{i:064x}", size=i + 1)
        writer.append(ToolCall(seq=3 * i, wall=1, mono=0, name="lookup", output_blob=blob))
        writer.append(LLMCall(seq=3 * i + 1, wall=1, mono=0, provider="openai", model=f"m{i}"))
        writer.append(ClockRead(seq=3 * i + 2, wall=1, mono=0, value=float(i)))
        models.append(ModelInfo(provider="openai", model=f"m{i}"))
    writer.close(durable=False)
    data = (store.run_dir("long") / EVENTS).read_bytes()
    assert len(data) > 2 * TALLY_BATCH
    assert writer.tally() is not None
    sealed = finish_manifest(store, writer.manifest, writer, durable=False)
    assert sealed.event_count == 1800
    assert sealed.events_sha256 == sha256_bytes(data)
    assert sealed.blob_bytes == sum(range(1, 601))
    assert sorted(sealed.models, key=lambda m: m.model) == sorted(models, key=lambda m: m.model)


def test_a_log_changed_behind_its_writer_is_read_back(store: DirectoryStore) -> None:
    """What the writer counted is not used once the log holds more than it wrote (a line
    appended by another process) or is another file (rewritten whole, even to the same
    size): the run is sealed from the log as it stands."""
    events = _mixed_events()
    writer = store.begin(Manifest(run_id="appended", created=CREATED))
    writer.append(events[0])
    with open(store.run_dir("appended") / EVENTS, "ab") as other:
        other.write(dump_event(events[2]))
    writer.close(durable=False)
    assert writer.tally() is None
    assert finish_manifest(store, writer.manifest, writer, durable=False).event_count == 2

    writer = store.begin(Manifest(run_id="rewritten", created=CREATED))
    writer.append(events[2])
    writer.close(durable=False)
    path = store.run_dir("rewritten") / EVENTS
    same_size = path.read_bytes().replace(b"1.0", b"2.0")
    atomic_write(path, same_size)
    sealed = finish_manifest(store, writer.manifest, writer, durable=False)
    assert sealed.events_sha256 == sha256_bytes(same_size)


def test_an_event_cut_short_by_a_full_log_is_an_error(tmp_path: Path) -> None:
    """A write the system cuts short (here by the file size limit, as a full disk does) is
    an error, so the capture marks its run damaged instead of sealing half a line."""
    script = f"""
import os, resource, signal, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from snapshot_factory import CREATED
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.errors import StoreWriteError
from sandbox.snapshot.events import ClockRead
store = DirectoryStore({str(tmp_path / "s")!r})
writer = store.begin(Manifest(run_id="full", created=CREATED))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
try:
    writer.append(ClockRead(seq=0, wall=0, mono=0, value=1.0, name="x" * 200))
except StoreWriteError as exc:
    print("refused:", exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert "refused: cannot write to " in done.stdout and "100 of" in done.stdout, done.stderr


def test_a_manifest_is_written_as_its_model_dumps_it() -> None:
    """The package list, written once per process and put in its place, leaves the bytes
    of ``manifest.json`` those of the model's own JSON, with and without it, tags and an
    environment."""
    runtime = Runtime(python="3.11.7", platform="Linux", packages={"a": "1", "b-c": "2.0"})
    plain = Manifest(run_id="m", created=CREATED)
    for manifest in (
        plain,
        plain.model_copy(update={"runtime": runtime}),
        plain.model_copy(update={"runtime": runtime, "tags": ["t"], "env": {"A": "1"}}),
        plain.model_copy(update={"runtime": Runtime(python="3", platform="x")}),
    ):
        assert dump_manifest(manifest) == manifest.model_dump_json(indent=2).encode() + b"\n"
        assert parse_manifest(dump_manifest(manifest)) == manifest


def test_a_store_opened_by_path_is_one_object_per_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened by a relative path, an absolute one or a ``file://`` URL, one folder is one
    store object (a service opens its store at every request); another folder, or the same
    relative path from another current folder, is another store."""
    monkeypatch.chdir(tmp_path)
    here = open_store("s")
    assert open_store(str(tmp_path / "s")) is here
    assert open_store(f"file://{tmp_path}/s") is here
    assert isinstance(here, DirectoryStore) and here.root == tmp_path / "s"
    assert open_store("t") is not here
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    there = open_store("s")
    assert isinstance(there, DirectoryStore) and there.root == tmp_path / "sub" / "s"


def test_a_replaced_placeholder_key_is_read_again_once_looked_at_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is read once and handed out the same; its file replaced, the store reads
    the new one when it looks at the file again (at once here: no interval)."""
    store = DirectoryStore(tmp_path)
    key = store.placeholder_key()
    assert store.placeholder_key() == key and len(key) == 32
    (tmp_path / PLACEHOLDER_KEY).unlink()
    assert store.placeholder_key() == key  # within the interval: not looked at
    monkeypatch.setattr(store_module, "KEY_CHECKED_EVERY", 0.0)
    fresh = store.placeholder_key()
    assert fresh != key and (tmp_path / PLACEHOLDER_KEY).exists()
