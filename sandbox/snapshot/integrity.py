"""Integrity checks of one run's files, wherever they come from (a store or a bundle).

:func:`check_run_files` takes the bytes of ``manifest.json`` and ``events.jsonl`` and a way to
look blobs up, and lists every problem found, each naming the file it is about with the same
relative path in a store and in a bundle (``runs/<id>/events.jsonl``,
``blobs/sha256/<ab>/<sha256>``). It never raises for bad content: it reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.errors import SnapshotError
from sandbox.snapshot.events import Event
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.snapshot import iter_blob_refs
from sandbox.snapshot.store import (
    EVENTS,
    MANIFEST,
    DirectoryStore,
    count_events,
    parse_event,
    parse_manifest,
)

MAX_PROBLEMS_PER_FILE = 20
"""After this many problems in one file, the rest are summed up in one line."""

BlobLookup = Callable[[str], bytes | None]
"""Returns a blob's bytes by its SHA-256 key, or ``None`` when it is absent."""


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
class RunCheck:
    """What :func:`check_run_files` found."""

    run_id: str
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    manifest: Manifest | None = None
    events: list[Event] = field(default_factory=list)
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
    events_bytes: bytes | None,
    blob: BlobLookup,
) -> RunCheck:
    """Check a run: the manifest (schema and version), every event line, ``seq`` contiguous
    from 0, ``events_sha256``/``event_count`` when present, and every referenced blob present
    with content matching its SHA-256 and size."""
    check = RunCheck(run_id)
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

    if events_bytes is None:
        check.problems.append(Problem(e_path, "missing"))
    else:
        _check_events(check, e_path, events_bytes, manifest)

    sizes: dict[str, set[int]] = {}
    for ref in iter_blob_refs([manifest, *check.events] if manifest else check.events):
        sizes.setdefault(ref.sha256, set()).add(ref.size)
    check.blob_keys = set(sizes)
    for key in sorted(sizes):
        path = blob_member(key)
        data = blob(key)
        if data is None:
            check.problems.append(Problem(path, "missing: the run references it"))
        elif sha256_bytes(data) != key:
            check.problems.append(Problem(path, "content does not match its SHA-256"))
        else:
            for size in sorted(sizes[key] - {len(data)}):
                check.problems.append(
                    Problem(path, f"size is {len(data)} bytes, the run references {size}")
                )
    return check


def _check_events(check: RunCheck, path: str, data: bytes, manifest: Manifest | None) -> None:
    running = manifest is not None and manifest.status == "running"
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail:
        if running:
            check.warnings.append(
                Problem(path, "last line is cut (the capture is running or crashed); ignored")
            )
        else:
            lines.append(tail)
    line_problems: list[Problem] = []
    index = 0
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            event = parse_event(line, f"line {number}")
        except SnapshotError as exc:
            line_problems.append(Problem(path, str(exc)))
        else:
            if event.seq != index:
                line_problems.append(
                    Problem(path, f"line {number}: seq is {event.seq}, expected {index}")
                )
            check.events.append(event)
        index += 1
    if len(line_problems) > MAX_PROBLEMS_PER_FILE:
        more = len(line_problems) - MAX_PROBLEMS_PER_FILE
        line_problems = line_problems[:MAX_PROBLEMS_PER_FILE]
        line_problems.append(Problem(path, f"... and {more} more problem(s) in this file"))
    check.problems.extend(line_problems)

    if manifest is None:
        return
    if manifest.events_sha256 is not None:
        found = sha256_bytes(data)
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
    if manifest.event_count is not None:
        found_count = count_events(data)
        if found_count != manifest.event_count:
            check.problems.append(
                Problem(
                    path,
                    f"{found_count} event line(s), manifest.event_count is {manifest.event_count}",
                )
            )


def store_blob_lookup(store: DirectoryStore) -> BlobLookup:
    """Look blobs up in a directory store (``None`` when absent)."""

    def lookup(key: str) -> bytes | None:
        try:
            return store.blob_path(key).read_bytes()
        except OSError:
            return None

    return lookup


def check_store_run(store: DirectoryStore, run_id: str) -> RunCheck:
    """Check a run kept in a directory store (raises :class:`UnknownRunError` if absent)."""
    folder = store.run_dir(run_id)
    if not (folder / MANIFEST).is_file():
        store.load_manifest(run_id)  # raises UnknownRunError with near matches
    manifest_bytes = (folder / MANIFEST).read_bytes()
    events_path = folder / EVENTS
    events_bytes = events_path.read_bytes() if events_path.is_file() else None
    return check_run_files(run_id, manifest_bytes, events_bytes, store_blob_lookup(store))
