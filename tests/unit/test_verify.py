"""Verification of runs in a store and of bundle files: every problem names its file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest
from snapshot_factory import (
    CREATED,
    build_snapshot,
    flip,
    read_members,
    reg,
    rewrite,
    write_tar,
)

from sandbox.errors import UnknownRunError
from sandbox.snapshot import SCHEMA_VERSION, DirectoryStore, Manifest
from sandbox.snapshot.bundle import export_bundle
from sandbox.snapshot.events import ClockRead
from sandbox.snapshot.integrity import blob_member
from sandbox.snapshot.store import EVENTS, MANIFEST, dump_event
from sandbox.snapshot.verify import verify_bundle, verify_run

EVENTS_PATH = "runs/run-1/events.jsonl"
MANIFEST_PATH = "runs/run-1/manifest.json"


def _texts(problems: Iterable[object]) -> list[str]:
    return [str(p) for p in problems]


def test_a_clean_run_verifies(store: DirectoryStore) -> None:
    build_snapshot(store)
    report = verify_run(store, "run-1")
    assert report.ok, report.problems
    assert (report.events, report.blobs, report.warnings) == (12, 3, [])


def test_unknown_run_raises(store: DirectoryStore) -> None:
    with pytest.raises(UnknownRunError):
        verify_run(store, "absent")


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_flipped_byte_in_a_blob_is_named(store: DirectoryStore, which: int) -> None:
    snapshot = build_snapshot(store)
    key = sorted(snapshot.blob_refs())[which]
    path = store.blob_path(key)
    data = path.read_bytes()
    path.write_bytes(flip(data, len(data) // 2))
    report = verify_run(store, "run-1")
    assert _texts(report.problems) == [f"{blob_member(key)}: content does not match its SHA-256"]


@pytest.mark.parametrize("position", [0, 0.5, -2])
def test_a_flipped_byte_in_the_event_log_is_named(store: DirectoryStore, position: float) -> None:
    build_snapshot(store)
    path = store.run_dir("run-1") / EVENTS
    data = path.read_bytes()
    path.write_bytes(flip(data, int(len(data) * position) if position >= 0 else len(data) - 2))
    report = verify_run(store, "run-1")
    assert not report.ok
    texts = _texts(report.problems)
    assert f"{EVENTS_PATH}: sha256 differs from manifest.events_sha256" in "\n".join(texts)
    assert all(t.startswith(EVENTS_PATH) for t in texts)


def test_a_flip_inside_a_string_still_parses_but_the_hash_catches_it(
    store: DirectoryStore,
) -> None:
    build_snapshot(store)
    path = store.run_dir("run-1") / EVENTS
    path.write_bytes(path.read_bytes().replace(b'"buy"', b'"bux"'))
    problems = _texts(verify_run(store, "run-1").problems)
    assert len(problems) == 1
    assert problems[0].startswith(f"{EVENTS_PATH}: sha256 differs from manifest.events_sha256")


def test_missing_blob_bad_lines_gaps_and_counts_are_each_reported(store: DirectoryStore) -> None:
    snapshot = build_snapshot(store)
    key = sorted(snapshot.blob_refs())[0]
    store.blob_path(key).unlink()
    lines = store.read_events_bytes("run-1").splitlines(keepends=True)
    lines[2] = b'{"kind": "clock", "seq": "two"}\n'
    del lines[5]  # a gap in seq, and one line fewer than event_count
    (store.run_dir("run-1") / EVENTS).write_bytes(b"".join(lines))
    text = "\n".join(_texts(verify_run(store, "run-1").problems))
    assert f"{blob_member(key)}: missing" in text
    assert f"{EVENTS_PATH}: line 3:" in text
    assert f"{EVENTS_PATH}: line 6: seq is 6, expected 5" in text
    assert f"{EVENTS_PATH}: 11 event line(s), manifest.event_count is 12" in text


def test_a_newer_manifest_is_reported_with_both_versions(store: DirectoryStore) -> None:
    build_snapshot(store)
    path = store.run_dir("run-1") / MANIFEST
    raw = json.loads(path.read_bytes())
    raw["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(raw))
    (problem,) = _texts(verify_run(store, "run-1").problems)
    assert problem.startswith(MANIFEST_PATH)
    assert f"schema version {SCHEMA_VERSION + 1}" in problem
    assert f"reads version {SCHEMA_VERSION}" in problem


def test_running_runs_tolerate_a_torn_tail_and_unsealed_runs_warn(store: DirectoryStore) -> None:
    line = dump_event(ClockRead(seq=0, wall=0, mono=0, value=1.0))
    store.save_raw(Manifest(run_id="live", created=CREATED), line + line[:7])
    report = verify_run(store, "live")
    assert report.ok
    assert "last line is cut" in _texts(report.warnings)[0]

    writer = store.begin(Manifest(run_id="old", created=CREATED))
    writer.append(ClockRead(seq=0, wall=0, mono=0, value=1.0))
    writer.update_manifest(writer.manifest.model_copy(update={"status": "complete"}))
    writer.close()
    report = verify_run(store, "old")
    assert report.ok
    assert "events_sha256 is missing" in _texts(report.warnings)[0]


def test_a_clean_bundle_verifies_and_a_tampered_one_names_the_member(
    store: DirectoryStore, tmp_path: Path
) -> None:
    snapshot = build_snapshot(store)
    bundle = export_bundle(store, "run-1", tmp_path / "b.tar.gz")
    report = verify_bundle(bundle)
    assert report.ok, report.problems
    assert (report.run_id, report.events, report.blobs) == ("run-1", 12, 3)

    key = sorted(snapshot.blob_refs())[1]
    members = dict(read_members(bundle))
    blob = members[blob_member(key)]
    bad = rewrite(bundle, tmp_path / "bad.tar.gz", {blob_member(key): flip(blob, 3)})
    text = "\n".join(_texts(verify_bundle(bad).problems))
    assert f"{blob_member(key)}: sha256 differs from bundle.json" in text
    assert f"{blob_member(key)}: content does not match its SHA-256" in text

    events = members[EVENTS_PATH]
    bad = rewrite(bundle, tmp_path / "bad2.tar.gz", {EVENTS_PATH: flip(events, 40)})
    text = "\n".join(_texts(verify_bundle(bad).problems))
    assert f"{EVENTS_PATH}: sha256 differs from bundle.json" in text
    assert f"{EVENTS_PATH}: sha256 differs from manifest.events_sha256" in text


def test_an_unsafe_or_unreadable_bundle_is_one_problem_naming_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"junk")
    (problem,) = verify_bundle(junk).problems
    assert problem.path == str(junk)
    assert "gzip" in problem.message

    evil = write_tar(tmp_path / "evil.tar.gz", [reg("../../evil", b"x")])
    (problem,) = verify_bundle(evil).problems
    assert "climbs out" in str(problem)
    assert not (tmp_path.parent.parent / "evil").exists()
