"""Builders shared by the store, bundle, verify and CLI tests: snapshots made through the
public API, and hand-made tar.gz files for hostile bundles."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sandbox.snapshot import Manifest, Snapshot, Store
from sandbox.snapshot.events import (
    ClockRead,
    ErrorInfo,
    Event,
    FinalResult,
    HTTPExchange,
    LLMCall,
    MemoryOp,
    RandomDraw,
    Retrieval,
    RetrievedDoc,
    RetryAttempt,
    StateTransition,
    Timeout,
    ToolCall,
)
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.manifest import Entrypoint, Failure, ServiceState

CREATED = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def publish_after_the_last_listing(
    monkeypatch: pytest.MonkeyPatch, store: Store, publish: Callable[[], object]
) -> None:
    """``publish`` runs just after ``store`` is listed the second time: a pruning lists it,
    removes runs, lists it again (a run that came meanwhile keeps its blobs), then removes
    blobs; a run published then appears between those two last steps."""
    real_list = store.list
    listings = 0

    def list_then_publish() -> list[Manifest]:
        nonlocal listings
        listings += 1
        found = real_list()
        if listings == 2:
            publish()
        return found

    monkeypatch.setattr(store, "list", list_then_publish)


def build_snapshot(store: Store, run_id: str = "run-1", *, save: bool = True) -> Snapshot:
    """A complete run with events of many kinds and three blobs (one in the manifest)."""
    dump = store.put_blob(b"CREATE TABLE orders (id int);\n" * 50, "application/sql")
    page = store.put_blob(b"<html>order page</html>", "text/html")
    doc = b"refund policy: 30 days"
    doc_ref = store.put_blob(doc, "text/plain")
    manifest = Manifest(
        run_id=run_id,
        name="duplicate order",
        created=CREATED,
        status="complete",
        entrypoint=Entrypoint(kind="callable", target="examples.shop:run"),
        services=[ServiceState(name="db", kind="postgres", before=dump)],
        failure=Failure(reason="order placed twice"),
    )
    events: list[Event] = [
        LLMCall(seq=0, wall=1.0, mono=0.01, name="plan", model="m", response={"text": "buy"}),
        ClockRead(seq=1, wall=1.1, mono=0.02, value=1709294400.0),
        RandomDraw(seq=2, wall=1.2, mono=0.03, source="uuid4", value="abc"),
        Retrieval(
            seq=3,
            wall=1.3,
            mono=0.04,
            query="refund",
            documents=[RetrievedDoc(id="d1", sha256=sha256_bytes(doc), blob=doc_ref)],
        ),
        MemoryOp(seq=4, wall=1.4, mono=0.05, op="write", key="cart", value=[1, 2]),
        ToolCall(
            seq=5,
            wall=1.5,
            mono=0.06,
            name="place_order",
            args={"sku": "A1", "qty": 1},
            error=ErrorInfo(type="TimeoutError", message="read timed out"),
        ),
        Timeout(seq=6, parent=5, wall=1.6, mono=0.07, after=5.0, committed=True),
        RetryAttempt(seq=7, wall=1.7, mono=0.08, outcome="error", wait=0.5),
        ToolCall(seq=8, wall=1.8, mono=0.09, name="place_order", args={"sku": "A1"}, attempt=2),
        HTTPExchange(
            seq=9,
            wall=1.9,
            mono=0.10,
            task="t2",
            method="GET",
            url="http://shop.test/o/1",
            status=200,
            response_blob=page,
        ),
        StateTransition(seq=10, wall=2.0, mono=0.11, source="ordering", target="done"),
        FinalResult(seq=11, wall=2.1, mono=0.12, value={"orders": 2}),
    ]
    snapshot = Snapshot(manifest, events)
    if save:
        store.save(snapshot)
    return snapshot


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (folders as ``None``), to compare a tree before and after."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
    }


def read_members(bundle: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(bundle, "r:gz") as tar:
        out = []
        for member in tar.getmembers():
            f = tar.extractfile(member)
            assert f is not None
            out.append((member.name, f.read()))
        return out


def reg(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, b""


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """A gzip-compressed tar with exactly these members (no checks, in this order)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path


def rewrite(bundle: Path, out: Path, changes: dict[str, bytes | None]) -> Path:
    """Copy a bundle, replacing (or with ``None`` dropping) members by name."""
    members = []
    for name, data in read_members(bundle):
        if name in changes:
            new = changes[name]
            if new is None:
                continue
            data = new
        members.append(reg(name, data))
    return write_tar(out, members)


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]
