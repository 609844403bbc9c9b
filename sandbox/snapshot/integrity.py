"""Integrity checks of one run's files, wherever they come from (a store or a bundle).

:func:`check_run_files` takes the bytes of ``manifest.json`` and ``events.jsonl`` and a way to
look blobs up, and lists every problem found, each naming the file it is about with the same
relative path in a store and in a bundle (``runs/<id>/events.jsonl``,
``blobs/sha256/<ab>/<sha256>``). It never raises for bad content: it reports.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sandbox.errors import NotRegularFileError, SnapshotError, StoreError
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.snapshot import iter_blob_refs
from sandbox.snapshot.store import (
    EVENTS,
    MANIFEST,
    MAX_EVENT_LINE,
    Store,
    parse_event,
    parse_manifest,
)

MAX_PROBLEMS_PER_FILE = 20
"""After this many problems in one file, the rest are summed up in one line."""

BlobInfo = tuple[str, int]
"""A blob as found: the SHA-256 of its content and its size."""
BlobLookup = Callable[[str], BlobInfo | None]
"""Returns what a blob holds (hash and size) by its SHA-256 key, or ``None`` when absent."""
EventSource = bytes | Path | IO[bytes]
"""The event log: its bytes, the file it is in, or an open stream (read a line at a time)."""
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Problem:
    """One thing wrong, and the file (relative path) it is about."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def run_path(run_id: str, name: str) -> str:
    return f"runs/{run_id}/{name}"


def blob_member(key: str) -> str:
    return f"blobs/sha256/{key[:2]}/{key}"


@dataclass
class Integrity:
    """What :func:`check_run_files` found in a run's files."""

    run_id: str
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    manifest: Manifest | None = None
    event_count: int = 0
    """Event lines read (parsed or not)."""
    events_sha256: str | None = None
    """SHA-256 of the event log as read."""
    blob_keys: set[str] = field(default_factory=set)
    """Every blob the manifest and the parsed events reference."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _strip(message: str, source: str) -> str:
    prefix = f"{source}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def check_run_files(
    run_id: str,
    manifest_bytes: bytes | None,
    events: EventSource | None,
    blob: BlobLookup,
) -> Integrity:
    """Check a run: the manifest (schema and version), every event line, ``seq`` contiguous
    from 0, ``events_sha256``/``event_count`` when present, and every referenced blob present
    with content matching its SHA-256 and size."""
    check = Integrity(run_id)
    m_path, e_path = run_path(run_id, MANIFEST), run_path(run_id, EVENTS)

    if manifest_bytes is None:
        check.problems.append(Problem(m_path, "missing"))
    else:
        try:
            check.manifest = parse_manifest(manifest_bytes, "manifest")
        except SnapshotError as exc:
            check.problems.append(Problem(m_path, _strip(str(exc), "manifest")))
        else:
            if check.manifest.run_id != run_id:
                check.problems.append(
                    Problem(m_path, f"run_id is {check.manifest.run_id!r}, expected {run_id!r}")
                )
    manifest = check.manifest

    sizes: dict[str, set[int]] = {}
    if manifest is not None:
        for ref in iter_blob_refs([manifest]):
            sizes.setdefault(ref.sha256, set()).add(ref.size)
    if events is None:
        check.problems.append(Problem(e_path, "missing"))
    else:
        with _open_events(events) as stream:
            _check_events(check, e_path, stream, manifest, sizes)

    check.blob_keys = set(sizes)
    for key in sorted(sizes):
        path = blob_member(key)
        try:
            found = blob(key)
        except NotRegularFileError as exc:
            check.problems.append(Problem(path, exc.reason))
            continue
        if found is None:
            check.problems.append(Problem(path, "missing: the run references it"))
            continue
        digest, length = found
        if digest != key:
            check.problems.append(Problem(path, "content does not match its SHA-256"))
        else:
            for size in sorted(sizes[key] - {length}):
                check.problems.append(
                    Problem(path, f"size is {length} bytes, the run references {size}")
                )
    return check


def _open_events(events: EventSource) -> contextlib.AbstractContextManager[IO[bytes]]:
    if isinstance(events, bytes):
        return contextlib.nullcontext(io.BytesIO(events))
    if isinstance(events, Path):
        return open(events, "rb")
    return contextlib.nullcontext(events)


def _lines(stream: IO[bytes], digest: Any) -> Iterator[tuple[bytes, bool]]:
    """Lines of ``stream`` (with their newline) and whether each was cut at
    :data:`MAX_EVENT_LINE`; the rest of a cut line is read and hashed, not kept."""
    while True:
        line = stream.readline(MAX_EVENT_LINE + 1)
        if not line:
            return
        digest.update(line)
        if len(line) > MAX_EVENT_LINE and not line.endswith(b"\n"):
            while True:
                rest = stream.readline(_CHUNK)
                digest.update(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            yield line[:MAX_EVENT_LINE], True
        else:
            yield line, False


def _check_events(
    check: Integrity,
    path: str,
    stream: IO[bytes],
    manifest: Manifest | None,
    sizes: dict[str, set[int]],
) -> None:
    running = manifest is not None and manifest.status == "running"
    digest = hashlib.sha256()
    line_problems: list[Problem] = []
    more = 0
    index = 0
    for number, (raw, cut) in enumerate(_lines(stream, digest), 1):
        if len(line_problems) > MAX_PROBLEMS_PER_FILE:  # count the rest, keep the first ones
            more += len(line_problems) - MAX_PROBLEMS_PER_FILE
            del line_problems[MAX_PROBLEMS_PER_FILE:]
        torn = not raw.endswith(b"\n")
        line = raw.rstrip(b"\n")
        if not line:
            continue
        if torn and not cut and running:
            check.warnings.append(
                Problem(path, "last line is cut (the capture is running or crashed); ignored")
            )
            continue
        index += 1
        if cut:
            line_problems.append(
                Problem(path, f"line {number}: longer than {MAX_EVENT_LINE} bytes, not read")
            )
            continue
        try:
            event = parse_event(line, f"line {number}")
        except SnapshotError as exc:
            line_problems.append(Problem(path, str(exc)))
            continue
        if event.seq != index - 1:
            line_problems.append(
                Problem(path, f"line {number}: seq is {event.seq}, expected {index - 1}")
            )
        if b"sha256" in line or b"\\u" in line:  # a BlobRef needs its key, maybe escaped
            for ref in iter_blob_refs([event]):
                sizes.setdefault(ref.sha256, set()).add(ref.size)
    check.event_count = index
    check.events_sha256 = digest.hexdigest()
    if len(line_problems) > MAX_PROBLEMS_PER_FILE:
        more += len(line_problems) - MAX_PROBLEMS_PER_FILE
        line_problems = line_problems[:MAX_PROBLEMS_PER_FILE]
    if more:
        line_problems.append(Problem(path, f"... and {more} more problem(s) in this file"))
    check.problems.extend(line_problems)

    if manifest is None:
        return
    if manifest.events_sha256 is not None:
        found = check.events_sha256
        if found != manifest.events_sha256:
            check.problems.append(
                Problem(
                    path,
                    f"sha256 differs from manifest.events_sha256 "
                    f"(manifest {manifest.events_sha256[:12]}…, file {found[:12]}…)",
                )
            )
    elif manifest.status == "complete":
        check.warnings.append(
            Problem(
                run_path(check.run_id, MANIFEST),
                "status is complete but events_sha256 is missing: tampering with the event "
                "log cannot be detected",
            )
        )
    if manifest.event_count is not None and index != manifest.event_count:
        check.problems.append(
            Problem(
                path,
                f"{index} event line(s), manifest.event_count is {manifest.event_count}",
            )
        )


def file_digest(path: Path) -> BlobInfo:
    """SHA-256 and size of a file, read in chunks."""
    with open(path, "rb") as f:
        return stream_digest(f)


def stream_digest(stream: IO[bytes]) -> BlobInfo:
    """SHA-256 and size of what a stream holds, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def store_blob_lookup(store: Store) -> BlobLookup:
    """Look blobs up in a store (``None`` when absent)."""

    def lookup(key: str) -> BlobInfo | None:
        try:
            with store.open_blob(key) as blob:
                return stream_digest(blob)
        except NotRegularFileError:
            raise  # reported as such, not as missing
        except (OSError, StoreError):
            return None

    return lookup


def check_store_run(store: Store, run_id: str) -> Integrity:
    """Check a run kept in a store (raises :class:`UnknownRunError` if absent)."""
    if not store.exists(run_id):
        store.load_manifest(run_id)  # raises UnknownRunError with near matches, or damaged
    try:
        manifest_bytes = store.read_manifest_bytes(run_id)
    except NotRegularFileError as exc:
        check = Integrity(run_id)
        check.problems.append(Problem(run_path(run_id, MANIFEST), exc.reason))
        return check
    except (OSError, SnapshotError) as exc:
        check = Integrity(run_id)
        check.problems.append(Problem(run_path(run_id, MANIFEST), f"unreadable: {exc}"))
        return check
    try:
        events = store.open_events(run_id)
    except NotRegularFileError as exc:
        check = check_run_files(run_id, manifest_bytes, b"", store_blob_lookup(store))
        e_path = run_path(run_id, EVENTS)
        check.problems = [p for p in check.problems if p.path != e_path]
        check.problems.insert(0, Problem(e_path, exc.reason))
        return check
    if events is None:
        return check_run_files(run_id, manifest_bytes, None, store_blob_lookup(store))
    with events:
        return check_run_files(run_id, manifest_bytes, events, store_blob_lookup(store))
