"""Bundles: a deterministic export, and an import that trusts nothing in the file."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from snapshot_factory import build_snapshot, read_members, reg, rewrite, special, tree, write_tar

from sandbox.errors import (
    BundleError,
    IntegrityError,
    SandboxError,
    SchemaVersionError,
    StoreError,
)
from sandbox.snapshot import SCHEMA_VERSION, DirectoryStore
from sandbox.snapshot.bundle import BundleLimits, export_bundle, import_bundle
from sandbox.snapshot.hashing import canonical_json, sha256_bytes
from sandbox.snapshot.integrity import blob_member
from sandbox.snapshot.verify import verify_run


@pytest.fixture
def bundle(store: DirectoryStore, tmp_path: Path) -> Path:
    build_snapshot(store)
    return export_bundle(store, "run-1", tmp_path / "out" / "run-1.tar.gz")


@pytest.fixture
def target(tmp_path: Path) -> DirectoryStore:
    return DirectoryStore(tmp_path / "target")


def test_round_trip_keeps_events_and_blobs_byte_identical(
    store: DirectoryStore, bundle: Path, target: DirectoryStore
) -> None:
    snapshot = store.load("run-1")
    assert import_bundle(target, bundle) == "run-1"
    assert target.read_events_bytes("run-1") == store.read_events_bytes("run-1")
    imported = target.load_manifest("run-1")
    assert imported.provenance is not None
    assert imported.provenance.imported_from == bundle.name
    assert imported.provenance.bundle_sha256 == sha256_bytes(bundle.read_bytes())
    assert imported.model_copy(update={"provenance": None}) == store.load_manifest("run-1")
    assert target.load("run-1").events == snapshot.events
    keys = snapshot.blob_refs()
    assert len(keys) == 3
    for key in keys:
        assert target.get_blob(key) == store.get_blob(key)
    assert verify_run(target, "run-1").ok


def test_export_is_deterministic_and_holds_only_referenced_blobs(
    store: DirectoryStore, bundle: Path, tmp_path: Path
) -> None:
    stray = store.put_blob(b"belongs to no run")
    again = export_bundle(store, "run-1", tmp_path / "again.tar.gz")
    assert again.read_bytes() == bundle.read_bytes()
    names = [name for name, _ in read_members(bundle)]
    assert names[0] == "bundle.json"
    assert names[1:] == sorted(names[1:])
    assert blob_member(stray.sha256) not in names
    assert {n for n in names if n.startswith("blobs/")} == {
        blob_member(k) for k in store.load("run-1").blob_refs()
    }
    with tarfile.open(bundle) as tar:
        for member in tar.getmembers():
            assert (member.mtime, member.uid, member.gid, member.isreg()) == (0, 0, 0, True)
    index = json.loads(dict(read_members(bundle))["bundle.json"])
    assert index["schema_version"] == SCHEMA_VERSION
    assert index["run_id"] == "run-1"
    contents = dict(read_members(bundle))
    for entry in index["members"]:
        assert entry["sha256"] == sha256_bytes(contents[entry["path"]])
        assert entry["size"] == len(contents[entry["path"]])
    assert {e["path"] for e in index["members"]} == set(names[1:])
    # no temporary file left beside the output
    assert sorted(p.name for p in bundle.parent.iterdir()) == ["run-1.tar.gz"]


def test_export_of_a_damaged_run_is_refused_and_writes_nothing(
    store: DirectoryStore, tmp_path: Path
) -> None:
    snapshot = build_snapshot(store)
    key = sorted(snapshot.blob_refs())[0]
    store.blob_path(key).write_bytes(b"tampered")
    with pytest.raises(IntegrityError, match=key):
        export_bundle(store, "run-1", tmp_path / "x" / "b.tar.gz")
    assert not (tmp_path / "x").exists()


def test_import_is_a_no_op_when_identical_and_refuses_a_different_run(
    store: DirectoryStore, bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    import_bundle(target, bundle)
    before = tree(target.root)
    assert import_bundle(target, bundle) == "run-1"
    assert tree(target.root) == before

    other = DirectoryStore(tmp_path / "other")
    snap = build_snapshot(other, save=False)
    other.save(type(snap)(snap.manifest, snap.events[:4]))
    different = export_bundle(other, "run-1", tmp_path / "different.tar.gz")
    with pytest.raises(StoreError, match="--force"):
        import_bundle(target, different)
    assert tree(target.root) == before
    import_bundle(target, different, force=True)
    assert len(target.load("run-1").events) == 4


def _assert_refused(
    path: Path, target: DirectoryStore, tmp_path: Path, match: str, exc: type = BundleError
) -> None:
    before = tree(tmp_path)
    with pytest.raises(exc, match=match):
        import_bundle(target, path)
    assert tree(tmp_path) == before  # nothing written anywhere: not in the store, not beside it


def _index_for(members: list[tuple[str, bytes]], run_id: str = "run-1") -> bytes:
    return canonical_json(
        {
            "format": "sandbox-replayer-bundle",
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "members": [{"path": n, "sha256": sha256_bytes(d), "size": len(d)} for n, d in members],
        }
    )


def _tar_with_index(path: Path, body: list[tuple[str, bytes]]) -> Path:
    """A bundle whose index agrees with ``body``, whatever ``body`` holds."""
    return write_tar(path, [reg("bundle.json", _index_for(body)), *(reg(n, d) for n, d in body)])


def _with_extra(bundle: Path, out: Path, extra: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    members = [reg(name, data) for name, data in read_members(bundle)]
    return write_tar(out, members + extra)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("../evil", "climbs out"),
        ("runs/../../evil", "climbs out"),
        ("/tmp/evil", "absolute"),
        ("runs/run-1/notes.txt", "unexpected member"),
        ("blobs/sha256/00/" + "ab" * 32, "unexpected member"),
        ("evil", "unexpected member"),
    ],
)
def test_members_with_unexpected_names_are_refused(
    bundle: Path, target: DirectoryStore, tmp_path: Path, name: str, match: str
) -> None:
    bad = _with_extra(bundle, tmp_path / "bad.tar.gz", [reg(name, b"x")])
    _assert_refused(bad, target, tmp_path, match)
    assert not (tmp_path.parent / "evil").exists()


@pytest.mark.parametrize(
    ("kind", "linkname"),
    [
        (tarfile.SYMTYPE, "/etc/passwd"),
        (tarfile.LNKTYPE, "runs/run-1/manifest.json"),
        (tarfile.FIFOTYPE, ""),
        (tarfile.CHRTYPE, ""),
        (tarfile.DIRTYPE, ""),
    ],
)
def test_links_devices_fifos_and_folders_are_refused(
    bundle: Path, target: DirectoryStore, tmp_path: Path, kind: bytes, linkname: str
) -> None:
    blob = "blobs/sha256/ab/" + "ab" * 32
    bad = _with_extra(bundle, tmp_path / "bad.tar.gz", [special(blob, kind, linkname)])
    _assert_refused(bad, target, tmp_path, "not a regular file")


def test_a_symlink_standing_in_for_the_manifest_is_refused(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    members = [
        special(n, tarfile.SYMTYPE, "../../../../etc/passwd")
        if n.endswith(".json") and n.startswith("runs/")
        else reg(n, d)
        for n, d in read_members(bundle)
    ]
    bad = write_tar(tmp_path / "bad.tar.gz", members)
    _assert_refused(bad, target, tmp_path, "not a regular file")


def test_duplicate_members_are_refused(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    name, data = read_members(bundle)[-1]
    bad = _with_extra(bundle, tmp_path / "bad.tar.gz", [reg(name, data + b" ")])
    _assert_refused(bad, target, tmp_path, "appears twice")


def test_limits_stop_decompression_bombs(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    bomb = write_tar(tmp_path / "bomb.tar.gz", [reg("bundle.json", b"{" + b" " * 5_000_000)])
    assert bomb.stat().st_size < 20_000  # compresses to almost nothing
    with pytest.raises(BundleError, match="more than the limit of 1000000"):
        import_bundle(target, bomb, limits=BundleLimits(max_member_bytes=1_000_000))
    with pytest.raises(BundleError, match="add up to more than 1000"):
        import_bundle(target, bundle, limits=BundleLimits(max_total_bytes=1000))
    with pytest.raises(BundleError, match="more than 3 members"):
        import_bundle(target, bundle, limits=BundleLimits(max_members=3))
    assert tree(target.root) == {}


def test_a_newer_bundle_schema_names_both_versions(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    index = json.loads(dict(read_members(bundle))["bundle.json"])
    index["schema_version"] = SCHEMA_VERSION + 1
    newer = rewrite(bundle, tmp_path / "newer.tar.gz", {"bundle.json": canonical_json(index)})
    with pytest.raises(SchemaVersionError) as info:
        import_bundle(target, newer)
    message = str(info.value)
    assert f"version {SCHEMA_VERSION + 1}" in message
    assert f"reads version {SCHEMA_VERSION}" in message
    assert "bundle.json" in message


def test_a_newer_manifest_schema_names_both_versions(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    members = dict(read_members(bundle))
    manifest = json.loads(members["runs/run-1/manifest.json"])
    manifest["schema_version"] = SCHEMA_VERSION + 1
    members["runs/run-1/manifest.json"] = json.dumps(manifest).encode()
    body = [(n, d) for n, d in members.items() if n != "bundle.json"]
    newer = _tar_with_index(tmp_path / "newer.tar.gz", body)
    with pytest.raises(
        SchemaVersionError,
        match=rf"version {SCHEMA_VERSION + 1}.*version "
        rf"{SCHEMA_VERSION}",
    ):
        import_bundle(target, newer)
    assert tree(target.root) == {}


def test_tampered_content_is_refused_even_with_a_consistent_index(
    store: DirectoryStore, bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    members = dict(read_members(bundle))
    key = sorted(store.load("run-1").blob_refs())[0]
    members[blob_member(key)] = b"evil payload"
    body = [(n, d) for n, d in members.items() if n != "bundle.json"]
    bad = _tar_with_index(tmp_path / "bad.tar.gz", body)
    _assert_refused(
        bad, target, tmp_path, f"{blob_member(key)}: content does not match", IntegrityError
    )


def test_a_member_differing_from_the_index_is_refused(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    events = dict(read_members(bundle))["runs/run-1/events.jsonl"]
    changed = events.replace(b'"buy"', b'"bye"')
    bad = rewrite(bundle, tmp_path / "bad.tar.gz", {"runs/run-1/events.jsonl": changed})
    _assert_refused(
        bad, target, tmp_path, "events.jsonl: sha256 differs from bundle.json", IntegrityError
    )


def test_smuggled_or_missing_members_are_refused(
    bundle: Path, target: DirectoryStore, tmp_path: Path
) -> None:
    members = [(n, d) for n, d in read_members(bundle) if n != "bundle.json"]
    stray = b"not referenced"
    extra = [*members, (blob_member(sha256_bytes(stray)), stray)]
    bad = _tar_with_index(tmp_path / "extra.tar.gz", extra)
    _assert_refused(bad, target, tmp_path, "not referenced by the run", IntegrityError)

    other_run = [*members, ("runs/other/manifest.json", b"{}")]
    bad = _tar_with_index(tmp_path / "other.tar.gz", other_run)
    _assert_refused(bad, target, tmp_path, "belongs to run 'other'", IntegrityError)

    no_index = rewrite(bundle, tmp_path / "noindex.tar.gz", {"bundle.json": None})
    _assert_refused(no_index, target, tmp_path, "bundle.json: missing")

    blob = next(n for n, _ in members if n.startswith("blobs/"))
    no_blob = rewrite(bundle, tmp_path / "noblob.tar.gz", {blob: None})
    _assert_refused(
        no_blob, target, tmp_path, f"{blob}: listed in bundle.json but not", IntegrityError
    )


@pytest.mark.parametrize(
    "content",
    [b"", b"not gzip at all", b"\x1f\x8b\x08\x00garbage", b"\x1f\x8b"],
)
def test_files_that_are_not_bundles_give_a_bundle_error(
    target: DirectoryStore, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "junk.tar.gz"
    path.write_bytes(content)
    _assert_refused(path, target, tmp_path, "junk.tar.gz")


def test_missing_file_and_folder_give_a_bundle_error(
    target: DirectoryStore, tmp_path: Path
) -> None:
    with pytest.raises(BundleError, match="no bundle file"):
        import_bundle(target, tmp_path / "absent.tar.gz")
    with pytest.raises(BundleError, match="is a folder"):
        import_bundle(target, tmp_path)


def test_a_failed_write_rolls_back_the_blobs_it_added(
    bundle: Path, target: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise SandboxError("disk full")

    monkeypatch.setattr(target, "save_raw", broken)
    with pytest.raises(SandboxError, match="disk full"):
        import_bundle(target, bundle)
    assert list(target.iter_blobs()) == []
