"""Snapshot stores: where runs and blobs live.

:class:`Store` is the small interface every backend implements; :class:`DirectoryStore` keeps
runs as folders and blobs by SHA-256 in one shared area::

    ROOT/runs/<run_id>/manifest.json
    ROOT/runs/<run_id>/events.jsonl
    ROOT/blobs/sha256/<ab>/<sha256>

Every write is atomic (a temporary file or folder, then a rename), so a reader never sees a
half-written file and a run folder appears whole or not at all.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, Protocol

from pydantic import ValidationError

from sandbox.errors import (
    IntegrityError,
    NotRegularFileError,
    SchemaVersionError,
    SnapshotError,
    StoreError,
    StoreWriteError,
    UnknownNameError,
    UnknownRunError,
    UnsafePathError,
)
from sandbox.names import DEFAULT_STORE, STORE_ENV
from sandbox.snapshot.events import EVENT_ADAPTER, SHA256_PATTERN, BlobRef, Event
from sandbox.snapshot.hashing import canonical_json, ordered_json, sha256_bytes
from sandbox.snapshot.manifest import RUN_ID_PATTERN, SCHEMA_VERSION, Manifest, Runtime
from sandbox.snapshot.snapshot import Snapshot, iter_blob_refs

MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
STALE_AFTER = 6 * 3600.0
"""Seconds after which an entry of ``.tmp`` is taken for the leftover of a killed writer."""
CLAIM_GRACE = 3600.0
"""Seconds before a pruning began during which a blob written or claimed by a run
(:meth:`Store.claim_blob`) is kept by it: that run may still be publishing."""
PLACEHOLDER_KEY = ".placeholder-key"
"""The store's secret for keyed placeholders (never exported: a bundle holds runs and blobs)."""

_RUN_ID = re.compile(RUN_ID_PATTERN)
_SHA = re.compile(SHA256_PATTERN)


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id) or run_id in {".", ".."}:
        raise UnsafePathError(f"invalid run id {run_id!r}: use letters, digits, '.', '_', '-'")
    return run_id


def check_blob_key(key: str) -> str:
    if not _SHA.match(key):
        raise UnsafePathError(f"invalid blob key {key!r}: expected a lowercase SHA-256")
    return key


def parse_manifest(data: bytes | str, source: str = MANIFEST) -> Manifest:
    """Validate a manifest, turning an unknown schema version into a clear error first."""
    import json

    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise SnapshotError(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise SnapshotError(f"{source}: expected a JSON object")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(version, SCHEMA_VERSION, source)
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        raise SnapshotError(f"{source}: {_first_error(exc)}") from None


MAX_EVENT_LINE = 16 * 1024 * 1024
"""A longer event line is not read (payloads this large are blobs)."""
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
"""A larger ``manifest.json`` (or ``bundle.json``) is refused unread."""


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a fifo"
    return "a special file"


def not_regular(path: Path, mode: int) -> NotRegularFileError:
    return NotRegularFileError(str(path), f"is {_kind(mode)}, not a regular file: refused unread")


def open_regular(path: Path) -> IO[bytes]:
    """Open a file of the store to read, never following a symbolic link in its last
    component and never reading a device or a fifo (:class:`NotRegularFileError`);
    ``FileNotFoundError`` when it is absent."""
    return os.fdopen(_open_fd(path, os.O_RDONLY), "rb")


def _open_fd(path: Path, flags: int) -> int:
    try:
        fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise not_regular(path, stat.S_IFLNK) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (a symbolic link to one is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def claim_file(path: Path) -> bool:
    """Whether the blob file at ``path`` is present, its time of change set to now
    (:meth:`Store.claim_blob`). A link or device in its place is not a blob (replaced, not
    followed); a blob removed meanwhile is not present (the caller writes it again)."""
    if not is_regular(path):
        return False
    try:
        os.utime(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:  # not the caller's to change (another user's store): present all the same
        pass
    return True


def read_manifest_bytes(path: Path) -> bytes:
    """``manifest.json``, refused unread when larger than :data:`MAX_MANIFEST_BYTES` (or
    when it is not a regular file)."""
    with open_regular(path) as f:
        data = f.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise SnapshotError(f"{path.name}: larger than {MAX_MANIFEST_BYTES} bytes, not read")
    return data


def parse_event(line: bytes | str, source: str) -> Event:
    try:
        return EVENT_ADAPTER.validate_json(line)
    except ValidationError as exc:
        raise SnapshotError(f"{source}: {_first_error(exc)}") from None


def parse_events(
    data: bytes, source: str = EVENTS, *, allow_torn_tail: bool = False
) -> list[Event]:
    """Parse ``events.jsonl``; with ``allow_torn_tail`` a last line cut by a crash is dropped."""
    lines = data.split(b"\n")
    tail = lines.pop()  # after the final newline: empty when the log is whole
    if tail and not allow_torn_tail:
        lines.append(tail)
    events = [parse_event(line, f"{source} line {i}") for i, line in enumerate(lines, 1) if line]
    for expected, event in enumerate(events):
        if event.seq != expected:
            raise SnapshotError(
                f"{source}: event {expected + 1} has seq {event.seq}, expected {expected}"
            )
    return events


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "value"
    return f"{where}: {err['msg']} ({exc.error_count()} error(s))"


def dump_event(event: Event) -> bytes:
    """One line of ``events.jsonl``: the kind first, then the fields that differ from their
    defaults; recorded values keep their keys' order."""
    body = event.model_dump(mode="json", exclude_defaults=True)
    return ordered_json({"kind": event.kind, **body}) + b"\n"


def dump_manifest(manifest: Manifest) -> bytes:
    """``manifest.json``: the manifest as JSON indented by two spaces. The runtime (most of
    it: the package list), the same for every run of a process, is written once per
    process and put in its place (:func:`_runtime_json`); the bytes are the same."""
    runtime = manifest.runtime
    if runtime is None or not runtime.packages:
        return manifest.model_dump_json(indent=2).encode() + b"\n"
    rest = manifest.model_dump_json(indent=2, exclude=_RUNTIME).encode()
    at = rest.find(_AFTER_RUNTIME) + 1
    if at == 0:  # not where it should be: written whole
        return manifest.model_dump_json(indent=2).encode() + b"\n"
    return rest[:at] + _runtime_json(runtime) + rest[at:] + b"\n"


_RUNTIME = {"runtime"}
_AFTER_RUNTIME = b'\n  "env": '
"""Where the runtime goes: before the next field of the manifest (``env``, always written),
at the top level (two spaces in)."""
_RUNTIME_JSONS: dict[int, tuple[object, bytes]] = {}


def _runtime_json(runtime: object) -> bytes:
    """The ``"runtime": {...},`` lines of a manifest holding ``runtime``, made once per
    runtime object (kept alive with its bytes)."""
    found = _RUNTIME_JSONS.get(id(runtime))
    if found is None or found[0] is not runtime:
        assert isinstance(runtime, Runtime)
        body = runtime.model_dump_json(indent=2).encode().replace(b"\n", b"\n  ")
        if len(_RUNTIME_JSONS) >= 16:
            _RUNTIME_JSONS.clear()
        found = _RUNTIME_JSONS[id(runtime)] = (runtime, b'  "runtime": ' + body + b",\n")
    return found[1]


def count_events(events: bytes) -> int:
    """Number of event lines (non-empty lines) in the bytes of ``events.jsonl``."""
    return sum(1 for line in events.split(b"\n") if line)


_EVENT_BLOB_REF = re.compile(rb'"sha256":"([0-9a-f]{64})","size":(\d+)')
"""A :class:`BlobRef` as :func:`dump_event` writes it (canonical JSON: keys sorted)."""


def event_blob_sizes(events: bytes) -> dict[str, int]:
    """The blobs the event log references, each with its size."""
    return {match[1].decode(): int(match[2]) for match in _EVENT_BLOB_REF.finditer(events)}


def referenced_blobs(
    manifest: Manifest, events: bytes, event_blobs: dict[str, int] | None = None
) -> dict[str, int]:
    """The distinct blobs referenced by the manifest and the event log (whose blobs are
    ``event_blobs`` when the caller knows them already), each with its size."""
    sizes = {ref.sha256: ref.size for ref in iter_blob_refs([manifest])}
    sizes.update(event_blob_sizes(events) if event_blobs is None else event_blobs)
    return sizes


def referenced_blob_bytes(
    manifest: Manifest, events: bytes, event_blobs: dict[str, int] | None = None
) -> int:
    """Bytes of the blobs :func:`referenced_blobs` finds."""
    return sum(referenced_blobs(manifest, events, event_blobs).values())


def seal_manifest(manifest: Manifest, events: bytes) -> Manifest:
    """Fill ``events_sha256``, ``event_count`` and ``blob_bytes`` of a complete run when
    they are missing, so that a flipped byte in its log is detected later and a listing
    needs the manifest only; other manifests are returned as is."""
    if manifest.status != "complete":
        return manifest
    updates: dict[str, object] = {}
    if manifest.events_sha256 is None:
        updates["events_sha256"] = sha256_bytes(events)
    if manifest.event_count is None:
        updates["event_count"] = count_events(events)
    if manifest.blob_bytes is None:
        updates["blob_bytes"] = referenced_blob_bytes(manifest, events)
    return manifest.model_copy(update=updates) if updates else manifest


_WRITE_FAILURES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file size limit is reached",
    errno.EROFS: "the store is on a read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


@contextlib.contextmanager
def store_writes(root: Path) -> Iterator[None]:
    """Turn a full disk, a read-only or unwritable store into one :class:`StoreWriteError` line
    (the temporary files of the write are removed by :func:`atomic_file` already)."""
    try:
        yield
    except OSError as exc:
        reason = _WRITE_FAILURES.get(exc.errno or 0)
        if reason is None:
            raise
        raise StoreWriteError(f"cannot write to {root}: {reason}") from None


@contextlib.contextmanager
def atomic_file(path: Path, *, durable: bool = True) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` (by a rename, after fsync unless not ``durable``)
    only when the block ends without an exception; otherwise the temporary file is
    removed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _write_synced(path: Path, data: bytes | Path) -> None:
    """Write ``data`` (or copy the file it names) to ``path`` and fsync it: a run folder
    renamed into place after this holds its whole files even after a crash of the machine."""
    with open(path, "wb") as out:
        if isinstance(data, bytes):
            out.write(data)
        else:
            with open(data, "rb") as src:
                shutil.copyfileobj(src, out, 1024 * 1024)
        out.flush()
        os.fsync(out.fileno())


def _write_new(path: Path, data: bytes) -> None:
    """Write a new file in a folder just made (nothing can stand in its place)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename
    (after an fsync unless not ``durable``: still all or nothing for a crashed process).
    The temporary file is made as :func:`atomic_file` makes it (a new name, readable by
    its owner only), with plain system calls."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = path.parent / f".tmp-{secrets.token_hex(6)}{path.name}"
        try:
            fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:  # taken (one in 2**48): another name
            continue
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class Store(Protocol):
    """What every snapshot store backend offers, and all that callers may rely on.

    A backend implements the primitives (the methods without a body here): begin a run that
    appends as it goes, or commit a whole run at once (a run appears complete or not at all),
    put and get content-addressed blobs, read a run's manifest and stream its events, list
    run ids, delete. The other operations are built on those and shared by every backend
    (a backend subclasses :class:`Store` to inherit them)."""

    location: str
    """Where the store is, as :func:`open_store` accepts it (a child process reopens it)."""

    # --- primitives ----------------------------------------------------------------------

    def placeholder_key(self) -> bytes:
        """The store's secret for keyed placeholders (32 bytes, made on first use, never
        exported)."""
        ...

    def put_blob(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """Store ``data`` under its SHA-256 (once: a blob already present is kept)."""
        ...

    def put_blob_file(self, source: Path, key: str) -> None:
        """Add a blob from a file whose SHA-256 the caller has checked to be ``key``."""
        ...

    def open_blob(self, key: str) -> IO[bytes]:
        """The blob's bytes as a stream (:class:`StoreError` when absent)."""
        ...

    def has_blob(self, key: str) -> bool: ...

    def delete_blob(self, key: str) -> None:
        """Remove a blob (nothing happens when it is absent)."""
        ...

    def claim_blob(self, key: str) -> bool:
        """Whether the blob is present, marked in use now: a run that reuses a blob the store
        holds claims it (so does :meth:`put_blob`), so that a pruning that began before it
        leaves the blob (:meth:`delete_blob_unclaimed`)."""
        ...

    def delete_blob_unclaimed(self, key: str, since: float) -> bool:
        """Remove a blob unless a run wrote or claimed it at or after ``since`` (seconds
        since the epoch): a run still being published may reference it. Whether it is gone
        (or was absent)."""
        ...

    def iter_blobs(self) -> Iterator[str]:
        """The keys of every blob in the store."""
        ...

    def begin(self, manifest: Manifest) -> RunWriter:
        """Create a run (atomically) for a capture that appends events as it goes."""
        ...

    def resume(self, run_id: str) -> RunWriter:
        """Append to a run that :meth:`begin` created (a replay's child process does)."""
        ...

    def save_raw(
        self, manifest: Manifest, events: bytes | Path, *, overwrite: bool = False
    ) -> None:
        """Commit a whole run from its manifest and the exact bytes of its event log (or the
        file holding them): it appears complete or not at all."""
        ...

    def exists(self, run_id: str) -> bool: ...

    def read_manifest_bytes(self, run_id: str) -> bytes:
        """The run's ``manifest.json`` as stored (:class:`UnknownRunError` when there is no
        such run, :class:`SnapshotError` when it is damaged)."""
        ...

    def open_events(self, run_id: str) -> IO[bytes] | None:
        """The run's ``events.jsonl`` as a stream, ``None`` when the run has no log."""
        ...

    def run_ids(self) -> list[str]:
        """The ids of the runs in the store, sorted; nothing is read inside them."""
        ...

    def run_bytes(self, run_id: str) -> int:
        """Bytes of the run's own files (its manifest and event log, not its blobs)."""
        ...

    def put_run_file(self, run_id: str, name: str, data: bytes) -> None:
        """Keep a file beside an existing run (an explanation), replacing it atomically."""
        ...

    def get_run_file(self, run_id: str, name: str) -> bytes | None:
        """A file kept beside a run by :meth:`put_run_file`, ``None`` when there is none."""
        ...

    def delete(self, run_id: str) -> None: ...

    def clean_stale(self, max_age: float = STALE_AFTER, now: float | None = None) -> int:
        """Remove what killed writers left behind (older than ``max_age`` seconds); return
        how many entries were removed."""
        ...

    # --- built on the primitives ---------------------------------------------------------

    def get_blob(self, key: str) -> bytes:
        with self.open_blob(key) as f:
            return f.read()

    def get_verified_blob(self, key: str) -> bytes:
        data = self.get_blob(key)
        if sha256_bytes(data) != key:
            raise IntegrityError(f"blob {key}: content does not match its SHA-256")
        return data

    def load_manifest(self, run_id: str) -> Manifest:
        return parse_manifest(self.read_manifest_bytes(run_id), f"{run_id}/{MANIFEST}")

    def read_events_bytes(self, run_id: str) -> bytes:
        stream = self.open_events(run_id)
        if stream is None:
            return b""
        with stream:
            return stream.read()

    def iter_events(
        self,
        run_id: str,
        *,
        kinds: Collection[str] = (),
        start: int = 0,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """The run's events, read one line at a time: those of ``kinds`` (every kind when
        empty) whose sequence number is at least ``start``, at most ``limit`` of them. Only
        the events yielded are validated, so memory and time follow what is shown; a last
        line cut by a crash is dropped while the run is still running."""
        torn_ok = self.load_manifest(run_id).status == "running"
        stream = self.open_events(run_id)
        if stream is None or limit == 0:
            return
        with stream as lines:
            yield from _select_events(lines, run_id, kinds, start, limit, torn_ok=torn_ok)

    def load_events(self, run_id: str) -> list[Event]:
        manifest = self.load_manifest(run_id)
        return parse_events(
            self.read_events_bytes(run_id),
            f"{run_id}/{EVENTS}",
            allow_torn_tail=manifest.status == "running",
        )

    def load(self, run_id: str) -> Snapshot:
        return Snapshot(self.load_manifest(run_id), self.load_events(run_id))

    def list(self) -> list[Manifest]:
        """The readable runs, oldest first; a damaged or unreadable run is left out (see
        :func:`sandbox.snapshot.listing.summarize_runs`, which lists it as damaged)."""
        manifests = []
        for run_id in self.run_ids():
            with contextlib.suppress(SnapshotError, OSError):
                manifests.append(self.load_manifest(run_id))
        return sorted(manifests, key=lambda m: (m.created, m.run_id))

    def save(self, snapshot: Snapshot, *, overwrite: bool = False) -> None:
        """Write a whole run at once: it appears complete or not at all."""
        body = b"".join(dump_event(e) for e in snapshot.events)
        self.save_raw(snapshot.manifest, body, overwrite=overwrite)


def unknown_run(store: Store, run_id: str) -> UnknownRunError:
    """The error for a run that is not in ``store``, naming the nearest run ids."""
    near = [k for k in store.run_ids() if run_id in k or k in run_id][:5]
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return UnknownRunError(f"no run {run_id!r} in store {store.location}{hint}")


def _select_events(
    lines: IO[bytes],
    run_id: str,
    kinds: Collection[str],
    start: int,
    limit: int | None,
    *,
    torn_ok: bool,
) -> Iterator[Event]:
    shown = 0
    # A compact line names its kind as "kind":"<kind>": one without any wanted kind is
    # skipped unparsed (a line written otherwise is parsed).
    wanted = [canonical_json({"kind": k})[1:-1] for k in kinds]
    for number, line in enumerate(lines, 1):
        source = f"{run_id}/{EVENTS} line {number}"
        if not line.endswith(b"\n") and torn_ok:
            return
        if wanted and b'"kind":"' in line and not any(w in line for w in wanted):
            continue
        try:
            head = json.loads(line)
        except ValueError:
            raise SnapshotError(f"{source}: not a JSON line") from None
        if not isinstance(head, dict):
            raise SnapshotError(f"{source}: not a JSON object")
        seq = head.get("seq")
        if (kinds and head.get("kind") not in kinds) or (isinstance(seq, int) and seq < start):
            continue
        yield parse_event(line, source)
        shown += 1
        if limit is not None and shown >= limit:
            return


def _append(path: Path) -> IO[bytes]:
    """The event log, opened to append unbuffered (never through a symbolic link)."""
    return os.fdopen(_open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab", buffering=0)


def _new_log(path: Path) -> IO[bytes]:
    """A new, empty event log (in a folder just made: nothing can stand in its place),
    opened to append unbuffered."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
    return open(os.open(path, flags, 0o666), "ab", buffering=0)


TALLY_BATCH = 64 * 1024
"""Bytes of event lines a :class:`LogTally` holds before it counts and hashes them."""
LLM_LINE = b'{"kind":"llm",'
"""How a model call's line of the event log starts (:func:`dump_event` writes the kind first)."""


class LogTally:
    """What a writer appended to an event log that was empty when it opened it: enough to
    seal the run (count, SHA-256, the blobs and the model calls it references) without
    reading the log back. The lines are counted and hashed a batch at a time (up to
    :data:`TALLY_BATCH` bytes, held until then), not one by one as each is written: read
    the counts after :meth:`settle` (:meth:`RunWriter.tally` does)."""

    def __init__(self, stat: os.stat_result) -> None:
        self.identity = (stat.st_dev, stat.st_ino)
        self.size = 0
        self.count = 0
        self.digest = hashlib.sha256()
        self.blobs: dict[str, int] = {}
        self.llm_lines: list[tuple[int, int]] = []
        """Where each model call's line is (offset, length): read back to list the models."""
        self.whole = True
        """Every line ended with a newline."""
        self._pending: list[bytes] = []
        self._counted = 0
        """Bytes of the lines counted so far (those after them are pending)."""

    def add(self, line: bytes) -> None:
        self._pending.append(line)
        self.size += len(line)
        if self.size - self._counted >= TALLY_BATCH:
            self.settle()

    def settle(self) -> None:
        """Count and hash the lines added since the last time."""
        lines, self._pending = self._pending, []
        at = self._counted
        for line in lines:
            if line.startswith(LLM_LINE):
                self.llm_lines.append((at, len(line)))
            self.whole = self.whole and line.endswith(b"\n")
            at += len(line)
        batch = b"".join(lines)
        self._counted = at
        self.count += batch.count(b"\n")
        self.digest.update(batch)
        if b'"sha256":"' in batch:
            self.blobs.update(event_blob_sizes(batch))

    def read_llm_lines(self, path: Path) -> list[bytes]:
        """The model calls' lines, read back from the log at ``path``."""
        if not self.llm_lines:
            return []
        with open_regular(path) as f:
            return [os.pread(f.fileno(), length, offset) for offset, length in self.llm_lines]

    def matches(self, path: Path) -> bool:
        """Whether the log at ``path`` is still the file this tally counted, whole, with
        nothing else appended (not replaced by a rewrite, not written by another process)."""
        try:
            stat = os.stat(path)
        except OSError:
            return False
        return (
            self.whole
            and (stat.st_dev, stat.st_ino) == self.identity
            and (stat.st_size == self.size)
        )


class RunWriter:
    """Appends events to a run as they happen; each line is flushed before ``append`` returns,
    so a killed process leaves every event up to the kill."""

    _tally: LogTally | None = None

    def __init__(self, folder: Path, manifest: Manifest, log: IO[bytes] | None = None) -> None:
        self.folder = folder
        self.manifest = manifest
        self._file: IO[bytes] = log if log is not None else _append(folder / EVENTS)
        stat = os.fstat(self._file.fileno())
        self._tally = LogTally(stat) if stat.st_size == 0 else None

    def append(self, event: Event) -> None:
        self.append_raw(dump_event(event))

    holds_lines = False
    """Whether lines appended now stay in memory (see :meth:`append_pending`)."""

    def append_pending(
        self,
        line: bytes | Callable[[], bytes],
        redact: Callable[[bytes], bytes],
        size: int = 0,
    ) -> None:
        """Append a serialized event line not redacted yet, or what makes it (an empty line
        is left out); ``redact`` makes it fit to leave the process. Here at once, so that
        it reaches the operating system as it happens; a writer that :attr:`holds_lines`
        makes and redacts them only when they leave memory (``size``: about how many bytes
        what makes a line holds until then)."""
        made = line if isinstance(line, bytes) else line()
        if made:
            self.append_raw(redact(made))

    def redact_held(self) -> None:
        """Make and redact the lines held back by :meth:`append_pending` (none here)."""

    def append_raw(self, line: bytes) -> None:
        """Append an already-serialized event line (ending in a newline) in one write; a
        write cut short (a full disk) is an error."""
        written = self._file.write(line)
        if written is not None and written != len(line):
            self._tally = None  # the log holds part of the line
            raise StoreWriteError(
                f"cannot write to {self.folder / EVENTS}: {written} of {len(line)} bytes written"
            )
        if self._tally is not None:
            self._tally.add(line)

    @property
    def log(self) -> IO[bytes]:
        """The event log, open to append."""
        return self._file

    def tally(self) -> LogTally | None:
        """What this writer appended, when that is the whole log as it stands."""
        tally = self._tally
        if tally is None:
            return None
        tally.settle()
        return tally if tally.matches(self.folder / EVENTS) else None

    def replace_events(self, data: bytes) -> None:
        """Replace the event log with ``data`` (atomically) and append after it."""
        self.close()
        self._tally = None
        atomic_write(self.folder / EVENTS, data)
        self._file = _append(self.folder / EVENTS)

    def update_manifest(self, manifest: Manifest, *, durable: bool = True) -> None:
        """Replace the manifest (atomically); ``durable=False`` skips the fsync for a
        version that a durable one replaces before the run ends."""
        self.manifest = manifest
        atomic_write(self.folder / MANIFEST, dump_manifest(manifest), durable=durable)

    def finish(self, manifest: Manifest) -> Manifest:
        """Close the log and write ``manifest`` (status ``complete``) sealed with the hash and
        count of the events written."""
        self.close()
        sealed = seal_manifest(manifest, (self.folder / EVENTS).read_bytes())
        self.update_manifest(sealed)
        return sealed

    def close(self, *, durable: bool = True) -> None:
        """Close the log (after an fsync unless not ``durable``: the caller syncs it)."""
        if not self._file.closed:
            if durable:
                os.fsync(self._file.fileno())
            self._file.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


KEY_CHECKED_EVERY = 1.0
"""Seconds during which a store's placeholder key, once read, is taken as unchanged."""


class DirectoryStore(Store):
    """A store in a local folder (the default backend)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self.location = str(self.root)
        self._staging_made = self._runs_made = False
        """Whether the staging area and ``runs/`` were made (or seen) already: a run's
        creation then tries without making them first."""
        self._key_read: tuple[float, tuple[int, int, int, int], bytes] | None = None
        """When the placeholder key's file was last looked at, its identity then, the key."""

    def __repr__(self) -> str:
        return f"DirectoryStore({str(self.root)!r})"

    # --- paths ---------------------------------------------------------------------------

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def blobs_dir(self) -> Path:
        return self.root / "blobs" / "sha256"

    def staging_dir(self) -> Path:
        """Where writes are staged before they appear (``ROOT/.tmp``); what a killed writer
        leaves there is removed by :meth:`clean_stale`."""
        path = self.root / ".tmp"
        with store_writes(self.root):
            path.mkdir(parents=True, exist_ok=True)
        return path

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / check_run_id(run_id)

    def blob_path(self, key: str) -> Path:
        check_blob_key(key)
        return self.blobs_dir / key[:2] / key

    def placeholder_key(self) -> bytes:
        """The store's placeholder key (32 random bytes), made on first use, readable only by
        its owner. Redaction keys its placeholders with it; it never goes into a bundle.
        Read once while its file stays the same one, which is looked at again (one
        ``stat``) at most once every :data:`KEY_CHECKED_EVERY` seconds: a service's runs
        each ask, through the one store object of its folder (:func:`open_store`)."""
        known, now = self._key_read, time.monotonic()
        if known is not None and now - known[0] < KEY_CHECKED_EVERY:
            return known[2]
        path = self.root / PLACEHOLDER_KEY
        with contextlib.suppress(FileNotFoundError):
            stat_ = os.stat(path)
            seen = (stat_.st_dev, stat_.st_ino, stat_.st_mtime_ns, stat_.st_size)
            key = known[2] if known is not None and known[1] == seen else None
            if key is None:
                key = self._read_placeholder_key(path)
            self._key_read = (now, seen, key)
            return key
        with store_writes(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-key-")
            try:
                with os.fdopen(fd, "w") as f:  # mkstemp makes it 0600
                    f.write(secrets.token_hex(32) + "\n")
                with contextlib.suppress(FileExistsError):  # another process made it first
                    os.link(tmp, path)
            finally:
                os.unlink(tmp)
        return self._read_placeholder_key(path)

    @staticmethod
    def _read_placeholder_key(path: Path) -> bytes:
        try:
            return bytes.fromhex(path.read_text().strip())
        except ValueError:
            raise StoreError(f"{path}: damaged placeholder key (expected 64 hex digits)") from None

    # --- blobs ---------------------------------------------------------------------------

    def put_blob(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        key = sha256_bytes(data)
        path = self.blob_path(key)
        if not claim_file(path):
            with store_writes(self.root):
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, data)
        return BlobRef(sha256=key, size=len(data), media_type=media_type)

    def put_blob_file(self, source: Path, key: str) -> None:
        path = self.blob_path(key)
        if claim_file(path):
            return
        with store_writes(self.root):
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path) as out, open(source, "rb") as src:
                shutil.copyfileobj(src, out, 1024 * 1024)

    def open_blob(self, key: str) -> IO[bytes]:
        try:
            return open_regular(self.blob_path(key))
        except FileNotFoundError:
            raise StoreError(f"blob {key} is not in the store {self.root}") from None

    def has_blob(self, key: str) -> bool:
        return is_regular(self.blob_path(key))

    def claim_blob(self, key: str) -> bool:
        return claim_file(self.blob_path(key))

    def delete_blob(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.blob_path(key).unlink()

    def delete_blob_unclaimed(self, key: str, since: float) -> bool:
        """The blob is renamed aside first, then its time of change read: a run that claims
        it before the rename left a time at or after ``since`` (it is put back), one that
        tries after finds it gone and writes it again (:func:`claim_file`)."""
        path = self.blob_path(key)
        aside = path.with_name(f".pruning-{secrets.token_hex(6)}-{key}")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return True
        if os.lstat(aside).st_mtime >= since:
            os.replace(aside, path)  # a run that wrote it again meanwhile wrote these bytes
            return False
        aside.unlink()
        return True

    def iter_blobs(self) -> Iterator[str]:
        if self.blobs_dir.is_dir():
            for path in sorted(self.blobs_dir.glob("??/*")):
                if _SHA.match(path.name):
                    yield path.name

    # --- runs ----------------------------------------------------------------------------

    def exists(self, run_id: str) -> bool:
        return (self.run_dir(run_id) / MANIFEST).is_file()

    def missing_manifest_reason(self, run_id: str) -> str:
        """Why a run folder has no readable ``manifest.json``."""
        try:
            os.stat(self.run_dir(run_id) / MANIFEST)
        except FileNotFoundError:
            return f"{MANIFEST} is missing"
        except OSError as exc:
            return f"{MANIFEST}: unreadable ({exc.strerror})"
        return f"{MANIFEST} is not a regular file"

    def _require(self, run_id: str) -> Path:
        folder = self.run_dir(run_id)
        try:
            mode = os.lstat(folder).st_mode
        except OSError:
            mode = stat.S_IFDIR  # absent (or unreadable): said below
        if not stat.S_ISDIR(mode):  # never followed: a link or a file is no run
            raise SnapshotError(
                f"run {run_id!r} is damaged: runs/{run_id} is {_kind(mode)}, not a folder"
            )
        if not (folder / MANIFEST).is_file():
            if folder.is_dir():
                reason = self.missing_manifest_reason(run_id)
                raise SnapshotError(f"run {run_id!r} is damaged: {reason}")
            raise unknown_run(self, run_id)
        return folder

    def read_manifest_bytes(self, run_id: str) -> bytes:
        return read_manifest_bytes(self._require(run_id) / MANIFEST)

    def open_events(self, run_id: str) -> IO[bytes] | None:
        try:
            return open_regular(self._require(run_id) / EVENTS)
        except FileNotFoundError:
            return None

    def run_ids(self) -> list[str]:
        """Names of the run folders (valid run ids), sorted; nothing is read inside them."""
        try:
            names = [p.name for p in self.runs_dir.iterdir()]
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StoreError(f"cannot read the store {self.root}: {exc.strerror}") from None
        return sorted(n for n in names if _RUN_ID.match(n) and n not in {".", ".."})

    def run_bytes(self, run_id: str) -> int:
        total = 0
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.run_dir(run_id)):
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        return total

    def _side_file(self, run_id: str, name: str) -> Path:
        if name in {MANIFEST, EVENTS} or not _RUN_ID.match(name) or name in {".", ".."}:
            raise UnsafePathError(f"invalid run file name {name!r}")
        return self._require(run_id) / name

    def put_run_file(self, run_id: str, name: str, data: bytes) -> None:
        with store_writes(self.root):
            atomic_write(self._side_file(run_id, name), data)

    def get_run_file(self, run_id: str, name: str) -> bytes | None:
        try:
            with open_regular(self._side_file(run_id, name)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def clean_stale(self, max_age: float = STALE_AFTER, now: float | None = None) -> int:
        tmp = self.root / ".tmp"
        limit = (time.time() if now is None else now) - max_age
        removed = 0
        try:
            entries = list(tmp.iterdir())
        except OSError:
            return 0
        for entry in entries:
            try:
                if entry.lstat().st_mtime > limit:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
                removed += 1
            except OSError:
                continue
        return removed

    def save_raw(
        self, manifest: Manifest, events: bytes | Path, *, overwrite: bool = False
    ) -> None:
        """Write a run from its manifest and the exact bytes of its event log (or the file
        holding them, copied); a complete run gets its ``events_sha256`` and ``event_count``
        filled in when missing (only from bytes: give a file with a sealed manifest)."""
        if isinstance(events, bytes):
            manifest = seal_manifest(manifest, events)
        target = self.run_dir(manifest.run_id)
        if target.exists() and not overwrite:
            raise StoreError(f"run {manifest.run_id!r} already exists in {self.root}")
        with store_writes(self.root):
            staging = Path(tempfile.mkdtemp(dir=self.staging_dir(), prefix="run-"))
        try:
            with store_writes(self.root):
                _write_synced(staging / MANIFEST, dump_manifest(manifest))
                _write_synced(staging / EVENTS, events)
                self.runs_dir.mkdir(parents=True, exist_ok=True)
                if target.exists():
                    self._remove(target)
                os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def begin(self, manifest: Manifest) -> RunWriter:
        """Create a run folder (atomically) for a capture that appends as it goes: a folder
        made aside holding the manifest and an empty log, renamed into ``runs/``."""
        target = self.run_dir(manifest.run_id)
        if os.path.lexists(target):
            raise StoreError(f"run {manifest.run_id!r} already exists in {self.root}")
        with store_writes(self.root):
            staging = self._made_aside()
        try:
            with store_writes(self.root):
                _write_new(staging / MANIFEST, dump_manifest(manifest))
                log = _new_log(staging / EVENTS)  # still the log once its folder is renamed
                try:
                    self._rename_in(staging, target)
                except BaseException:
                    log.close()
                    raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return RunWriter(target, manifest, log)

    def _made_aside(self) -> Path:
        """A new private folder in the staging area (made with the area when missing)."""
        if self._staging_made:
            with contextlib.suppress(FileNotFoundError):  # the area was removed since
                return Path(tempfile.mkdtemp(dir=self.root / ".tmp", prefix="run-"))
        folder = Path(tempfile.mkdtemp(dir=self.staging_dir(), prefix="run-"))
        self._staging_made = True
        return folder

    def _rename_in(self, staging: Path, target: Path) -> None:
        """Rename a folder made aside to ``target`` in ``runs/`` (made when missing)."""
        if self._runs_made:
            with contextlib.suppress(FileNotFoundError):
                os.rename(staging, target)
                return
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        os.rename(staging, target)
        self._runs_made = True

    def resume(self, run_id: str) -> RunWriter:
        return RunWriter(self._require(run_id), self.load_manifest(run_id))

    def delete(self, run_id: str) -> None:
        self._remove(self._require(run_id))

    def _remove(self, folder: Path) -> None:
        # Rename first so the run disappears at once, then remove at leisure.
        trash = self.staging_dir() / f"del-{uuid.uuid4().hex}"
        with store_writes(self.root):
            os.rename(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)


LAZY_BACKENDS: dict[str, str] = {"s3": "sandbox.snapshot.spool:SpooledStore"}
"""Backends by URL scheme that live in modules of their own (``module:class``, given the
whole location), imported on first use: they build on this module, and their client
libraries are optional."""


def open_store(location: str | os.PathLike[str] | None = None) -> Store:
    """Open a store by location: a folder path, a ``file://`` URL or an ``s3://BUCKET/PREFIX``
    URL (:class:`sandbox.snapshot.spool.SpooledStore`); ``None`` reads ``$SANDBOX_STORE`` and
    falls back to ``./snapshots``."""
    loc = str(location if location is not None else os.environ.get(STORE_ENV, DEFAULT_STORE))
    scheme, sep, rest = loc.partition("://")
    if not sep:
        return _directory_store(loc)
    if scheme == "file":
        return _directory_store(rest)
    if scheme in LAZY_BACKENDS:
        module, _, name = LAZY_BACKENDS[scheme].partition(":")
        backend: Callable[[str], Store] = getattr(importlib.import_module(module), name)
        return backend(loc)
    raise UnknownNameError("store scheme", scheme, ["file", *LAZY_BACKENDS])


_DIRECTORY_STORES: dict[str, DirectoryStore] = {}
"""The folder stores opened by path in this process, by absolute path: a service whose every
request is a run opens its store by path each time, and one object keeps what it has seen
(the folders it made)."""
_DIRECTORY_STORES_LIMIT = 64


def _directory_store(path: str) -> DirectoryStore:
    """The :class:`DirectoryStore` at ``path`` (relative to the current folder), the same
    object for the same folder."""
    where = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    found = _DIRECTORY_STORES.get(where)
    if found is None:
        if len(_DIRECTORY_STORES) >= _DIRECTORY_STORES_LIMIT:
            _DIRECTORY_STORES.clear()
        found = _DIRECTORY_STORES[where] = DirectoryStore(where)
    return found


def as_store(store: Store | str | os.PathLike[str] | None) -> Store:
    """``store`` itself, or the store :func:`open_store` opens at that location."""
    if store is None or isinstance(store, (str, os.PathLike)):
        return open_store(store)
    return store
