"""Property tests: whatever a bundle, manifest or event line holds, reading it raises nothing
but :class:`SandboxError` subclasses, verifying it raises nothing at all, and a change is
*detected*: a damaged bundle is refused with a clear error and writes nothing anywhere in the
temporary tree (or, when the damage changed no data, imports the very same run), and a
changed event log of a sealed run is reported by the check."""

from __future__ import annotations

import contextlib
import gzip
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from snapshot_factory import build_snapshot, read_members, reg, special, write_tar

from sandbox.errors import SandboxError, SnapshotError
from sandbox.snapshot import SCHEMA_VERSION, DirectoryStore
from sandbox.snapshot.bundle import BundleLimits, export_bundle, import_bundle
from sandbox.snapshot.hashing import canonical_json, sha256_bytes
from sandbox.snapshot.integrity import check_run_files, store_blob_lookup
from sandbox.snapshot.store import EVENTS, MANIFEST, parse_events, parse_manifest
from sandbox.snapshot.verify import verify_bundle

SMALL = BundleLimits(max_member_bytes=1 << 20, max_total_bytes=4 << 20, max_members=64)
FAST = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("base")
    store = DirectoryStore(root / "store")
    build_snapshot(store)
    bundle = export_bundle(store, "run-1", root / "run-1.tar.gz")
    folder = store.run_dir("run-1")
    return {
        "store": store,
        "blobs": {key: store.get_blob(key) for key in store.iter_blobs()},
        "bundle": bundle.read_bytes(),
        "tar": gzip.decompress(bundle.read_bytes()),
        "members": read_members(bundle),
        "manifest": (folder / MANIFEST).read_bytes(),
        "events": (folder / EVENTS).read_bytes(),
    }


def _files(root: Path) -> list[str]:
    """Every file (not folder) under ``root``, relative, sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


def _try_everything(data: bytes, base: dict[str, Any] | None = None) -> None:
    """Import and verify a bundle's bytes: only SandboxError may come out of the import and
    nothing out of the verification; a refused import writes no file anywhere in the temporary
    tree, and verification reports a problem too. With ``base`` (the bundle the bytes were
    damaged from), an accepted import must hold exactly the original run: damage is detected
    unless it changed no data."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "b.tar.gz"
        path.write_bytes(data)
        store = DirectoryStore(root / "store")
        try:
            run_id = import_bundle(store, path, limits=SMALL)
        except SandboxError as exc:
            assert str(exc) and "\n" not in str(exc).strip()  # one clear line
            assert _files(root) == ["b.tar.gz"], "a refused import wrote files"
            assert not verify_bundle(path, limits=SMALL).ok
            return
        verify_bundle(path, limits=SMALL)
        if base is None:
            return
        assert run_id == "run-1"
        assert store.read_events_bytes(run_id) == base["events"]
        assert {key: store.get_blob(key) for key in store.iter_blobs()} == base["blobs"]
        expected = ["b.tar.gz", *(f"store/runs/run-1/{n}" for n in (EVENTS, MANIFEST))]
        expected += [f"store/blobs/sha256/{k[:2]}/{k}" for k in base["blobs"]]
        assert [f for f in _files(root) if not f.startswith("store/.")] == sorted(expected)


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None, junk: bytes) -> bytes:
    buf = bytearray(data)
    for pos, xor in flips:
        buf[pos % len(buf)] ^= xor
    if cut is not None:
        del buf[cut % (len(buf) + 1) :]
    if junk:
        buf[len(buf) // 2 : len(buf) // 2] = junk
    return bytes(buf)


mutations = st.tuples(
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=6),
    st.none() | st.integers(0, 1 << 20),
    st.binary(max_size=16),
)


@settings(FAST, max_examples=300)
@given(mutation=mutations)
def test_mutated_bundle_files(base: dict[str, Any], mutation: tuple[Any, Any, bytes]) -> None:
    _try_everything(_mutate(base["bundle"], *mutation), base)


@settings(FAST, max_examples=1000)
@given(mutation=mutations)
def test_mutated_tar_streams(base: dict[str, Any], mutation: tuple[Any, Any, bytes]) -> None:
    # Mutate below the gzip layer, so that tar headers and member bytes get damaged too.
    _try_everything(gzip.compress(_mutate(base["tar"], *mutation), mtime=0), base)


names = st.sampled_from(
    [
        "bundle.json",
        "runs/run-1/manifest.json",
        "runs/run-1/events.jsonl",
        "runs/other/manifest.json",
        "blobs/sha256/ab/" + "ab" * 32,
        "blobs/sha256/00/" + "ab" * 32,
        "../evil",
        "/abs/evil",
        "runs/run-1/../../../evil",
        "runs/run-1",
        "",
        ".",
    ]
) | st.text(max_size=40)
kinds = st.sampled_from(
    [
        tarfile.REGTYPE,
        tarfile.AREGTYPE,
        tarfile.SYMTYPE,
        tarfile.LNKTYPE,
        tarfile.DIRTYPE,
        tarfile.FIFOTYPE,
        tarfile.CHRTYPE,
        tarfile.CONTTYPE,
        tarfile.GNUTYPE_SPARSE,
    ]
)


@settings(FAST, max_examples=400)
@given(
    members=st.lists(st.tuples(names, kinds, st.binary(max_size=64)), max_size=8),
    with_base=st.booleans(),
    with_index=st.booleans(),
)
def test_random_members(
    base: dict[str, Any],
    members: list[tuple[str, bytes, bytes]],
    with_base: bool,
    with_index: bool,
) -> None:
    body = [m for m in base["members"] if m[0] != "bundle.json"] if with_base else []
    body += [(name, data) for name, kind, data in members if kind == tarfile.REGTYPE]
    entries = []
    if with_index:
        index = {
            "format": "sandbox-replayer-bundle",
            "schema_version": SCHEMA_VERSION,
            "run_id": "run-1",
            "members": [{"path": n, "sha256": sha256_bytes(d), "size": len(d)} for n, d in body],
        }
        entries.append(reg("bundle.json", canonical_json(index)))
    entries += [reg(n, d) for n, d in body]
    entries += [special(n, k, "x") for n, k, _ in members if k != tarfile.REGTYPE]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_tar(Path(tmp) / "b.tar.gz", entries)
        _try_everything(path.read_bytes())


def _replace_field(raw: bytes, key: str, value: Any) -> bytes:
    obj = json.loads(raw)
    obj[key] = value
    return json.dumps(obj).encode()


manifest_keys = st.sampled_from(
    [
        "schema_version",
        "run_id",
        "created",
        "status",
        "pid",
        "services",
        "failure",
        "env",
        "event_count",
        "events_sha256",
        "entrypoint",
        "clock",
        "code",
        "unknown_field",
    ]
)


@settings(FAST, max_examples=600)
@given(
    key=manifest_keys,
    value=json_values,
    mutation=mutations,
    mode=st.sampled_from(["field", "bytes"]),
)
def test_mutated_manifests(
    base: dict[str, Any], key: str, value: Any, mutation: tuple[Any, Any, bytes], mode: str
) -> None:
    raw = (
        _replace_field(base["manifest"], key, value)
        if mode == "field"
        else _mutate(base["manifest"], *mutation)
    )
    try:
        parse_manifest(raw)
    except SnapshotError:
        unreadable = True
    else:
        unreadable = False
    check = check_run_files("run-1", raw, base["events"], store_blob_lookup(base["store"]))
    if unreadable:
        assert check.problems, "an unreadable manifest is reported"


event_keys = st.sampled_from(
    [
        "kind",
        "seq",
        "parent",
        "wall",
        "mono",
        "args",
        "output_blob",
        "error",
        "documents",
        "op",
        "value",
        "status",
        "attempt",
        "response_blob",
        "extra",
    ]
)


@settings(FAST, max_examples=600)
@given(
    line_no=st.integers(0, 11),
    key=event_keys,
    value=json_values,
    mutation=mutations,
    mode=st.sampled_from(["field", "bytes", "line"]),
)
def test_mutated_event_lines(
    base: dict[str, Any],
    line_no: int,
    key: str,
    value: Any,
    mutation: tuple[Any, Any, bytes],
    mode: str,
) -> None:
    lines = base["events"].splitlines(keepends=True)
    if mode == "field":
        lines[line_no] = _replace_field(lines[line_no], key, value) + b"\n"
    elif mode == "line":
        lines[line_no] = json.dumps(value).encode() + b"\n"
    else:
        lines[line_no] = _mutate(lines[line_no], *mutation)
    data = b"".join(lines)
    for torn in (False, True):
        with contextlib.suppress(SnapshotError):
            parse_events(data, allow_torn_tail=torn)
    check = check_run_files("run-1", base["manifest"], data, store_blob_lookup(base["store"]))
    assert check.ok == (data == base["events"]), "a changed log of a sealed run is detected"


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deeply_nested_json_is_a_snapshot_error(base: dict[str, Any], depth: int) -> None:
    deep = b"[" * depth + b"]" * depth
    with pytest.raises(SnapshotError):
        parse_manifest(deep)
    with pytest.raises(SnapshotError):
        parse_events(deep + b"\n")
    nested = b'{"kind":"result","seq":0,"wall":0,"mono":0,"value":' + deep + b"}\n"
    check_run_files("run-1", base["manifest"], nested, lambda key: None)
