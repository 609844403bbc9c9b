"""A run that may be dropped is held in memory until it is known to be kept.

Under ``keep="failed"`` (or a rate) most runs end well and are dropped. Writing each one's
manifest, event log and blobs to a folder aside only to remove it when it ends costs the
agent's path a folder made and removed, a file per event written, the manifest serialized,
for nothing. A :class:`HeldStore` keeps a run's blobs, and its :class:`HeldWriter` the run's
event lines (one line each) and manifest, in memory. The lines are held as the recorder made
them, not redacted yet, some not even made (an HTTP exchange's events are made from its
bytes: :meth:`HeldWriter.append_pending`): most are let go, and that work would be for
nothing. They are made and redacted with the run's redactor before they leave memory
(spilled, published, read back) and before a kept run is sealed
(:meth:`HeldWriter.redact_held`: redacting teaches the redactor the secrets a line shows,
which the seal then applies to what was written before).

A run that ends kept is finished on the background thread from memory (its log sealed,
its services' end states captured) and published straight into the real store
(:meth:`HeldStore.publish`: the blobs it lacks, then the run written whole, as
:meth:`~sandbox.snapshot.store.Store.save_raw` does). A run's files reach a folder aside (a
:class:`~sandbox.snapshot.store.DirectoryStore` in the real store's staging area, as a run
recorded aside always did) only when :meth:`HeldStore.spill` is called:

- when what the run holds passes :data:`RUN_LIMIT` bytes, or what every held run of the
  process holds passes :data:`PROCESS_LIMIT`: from then on its events are appended to its
  log as they happen (a long or large run costs disk, not memory);
- when a path is asked for (:attr:`HeldStore.location`): a child process the run follows
  writes its blobs into the store it is given.

A run dropped before any of these leaves nothing: no folder is made, no file written; what
it held is let go (:meth:`HeldStore.discard`).

What a crash loses: the runs held (not yet known to be kept, or kept and not finished yet)
are lost with the process. That is what a crash lost before as well: a run recorded aside
was never in the store until it ended kept (its folder aside is removed as stale).
``keep="all"`` is unchanged: its events reach the operating system as they happen (those
made from an exchange's bytes a moment later, on the drain's thread: :mod:`sandbox.capture.drain`).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from sandbox.snapshot.events import BlobRef
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import (
    EVENTS,
    MANIFEST,
    DirectoryStore,
    LogTally,
    RunWriter,
    Store,
    atomic_write,
    is_regular,
    store_writes,
)

RUN_LIMIT = 8 * 1024 * 1024
"""Bytes of events and blobs one run holds in memory before it spills to its folder aside."""
PROCESS_LIMIT = 256 * 1024 * 1024
"""Bytes every held run of the process holds in all before the next one to grow spills."""

_total = 0
_total_lock = threading.Lock()


def held_bytes() -> int:
    """Bytes held in memory by the runs of this process (for tests and benches)."""
    return _total


def _add(n: int) -> int:
    """Count ``n`` more bytes held (negative: let go); the process's new total."""
    global _total
    with _total_lock:
        _total += n
        return _total


class AsideStore(DirectoryStore):
    """A store of one run, aside: the real store's placeholder key, its own folders."""

    def __init__(self, root: Path, target: Store) -> None:
        super().__init__(root)
        self.target = target
        self._key: bytes | None = None

    def placeholder_key(self) -> bytes:
        if self._key is None:
            self._key = self.target.placeholder_key()
        return self._key

    def put_blob(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """As the store does, without syncing: what is aside is copied into the real store
        (synced there) or removed."""
        key = sha256_bytes(data)
        path = self.blob_path(key)
        if not is_regular(path):
            with store_writes(self.root):
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, data, durable=False)
        return BlobRef(sha256=key, size=len(data), media_type=media_type)


class HeldStore(Store):
    """The store of one run held in memory (see the module documentation): blobs in a
    dict until :meth:`spill`, then in the :class:`AsideStore` it made; the run's other
    operations are the aside store's (it is made for them)."""

    def __init__(self, target: Store) -> None:
        self.target = target
        self._blobs: dict[str, bytes] = {}
        self._bytes = 0
        self._aside: AsideStore | None = None
        self._writers: list[HeldWriter] = []
        self._lock = threading.RLock()
        self._making = False
        """The held lines are being made: what they store is held, not spilled, meanwhile."""
        self._key: bytes | None = None

    # --- being held ----------------------------------------------------------------------

    def hold(self, n: int) -> None:
        """Count ``n`` bytes more held by this run; past a limit the run spills."""
        self._bytes += n
        total = _add(n)
        if not self._making and (self._bytes > RUN_LIMIT or total > PROCESS_LIMIT):
            self.spill()

    def make_held(self) -> None:
        """Make and redact the lines held by the run's writers (under the lock): the blobs
        that making them stores are held meanwhile, whatever the limits."""
        if self._making:
            return
        self._making = True
        try:
            for writer in self._writers:
                writer._redact_pending()
        finally:
            self._making = False

    def _let_go(self) -> None:
        held, self._bytes = self._bytes, 0
        if held:
            _add(-held)

    def spill(self) -> AsideStore:
        """Write what the run holds to a folder aside (made now) and hold nothing more:
        the blobs into its store, each writer's manifest and log into its run folder."""
        with self._lock:
            if self._aside is None:
                self.make_held()  # before the folder aside: making lines may store blobs
                target = self.target
                base = target.staging_dir() if isinstance(target, DirectoryStore) else None
                root = Path(tempfile.mkdtemp(dir=base, prefix="keep-"))
                aside = AsideStore(root, self.target)
                try:
                    for data in self._blobs.values():
                        aside.put_blob(data)
                    for writer in self._writers:
                        writer._spill(aside)
                except BaseException:
                    shutil.rmtree(root, ignore_errors=True)
                    raise
                self._aside = aside
                self._blobs.clear()
                self._let_go()
            return self._aside

    def held_writer(self, run_id: str) -> HeldWriter | None:
        """The writer of run ``run_id`` while it holds its log in memory."""
        with self._lock:
            if self._aside is not None:
                return None
            return next((w for w in self._writers if w.manifest.run_id == run_id), None)

    def publish(self, run_id: str) -> None:
        """Write run ``run_id`` into the real store: the blobs it lacks, then the run whole
        (its manifest as it stands and its log); from the folder aside if the run spilled."""
        writer = self.held_writer(run_id)
        if writer is None:
            aside = self.spill()
            for key in aside.iter_blobs():
                if not self.target.claim_blob(key):
                    self.target.put_blob_file(aside.blob_path(key), key)
            folder = aside.run_dir(run_id)
            self.target.save_raw(aside.load_manifest(run_id), folder / EVENTS)
            for path in folder.iterdir():
                if path.name not in (MANIFEST, EVENTS) and path.is_file():
                    self.target.put_run_file(run_id, path.name, path.read_bytes())
            return
        with self._lock:
            blobs = list(self._blobs.items())
        for key, data in blobs:
            if not self.target.claim_blob(key):
                self.target.put_blob(data)
        self.target.save_raw(writer._out(writer.manifest), b"".join(writer.held()))

    def discard(self) -> None:
        """Let go of the run: what it holds, and its folder aside if it was made."""
        with self._lock:
            for writer in self._writers:
                writer._drop()
            self._writers.clear()  # each writer refers to this store: no cycle left to collect
            self._blobs.clear()
            self._let_go()
            aside, self._aside = self._aside, None
        if aside is not None:
            shutil.rmtree(aside.root, ignore_errors=True)

    # --- Store ---------------------------------------------------------------------------

    @property
    def location(self) -> str:  # type: ignore[override]
        """Where a child process finds the store: its folder aside (made when asked)."""
        return self.spill().location

    def placeholder_key(self) -> bytes:
        if self._key is None:
            self._key = self.target.placeholder_key()
        return self._key

    def put_blob(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        key = sha256_bytes(data)
        with self._lock:
            if self._aside is not None:
                return self._aside.put_blob(data, media_type)
            if key not in self._blobs:
                self._blobs[key] = bytes(data)
                self.hold(len(data))
        return BlobRef(sha256=key, size=len(data), media_type=media_type)

    def put_blob_file(self, source: Path, key: str) -> None:
        self.spill().put_blob_file(source, key)

    def open_blob(self, key: str) -> IO[bytes]:
        with self._lock:
            data = self._blobs.get(key)
            if data is None:
                return self.spill().open_blob(key)
        return io.BytesIO(data)

    def has_blob(self, key: str) -> bool:
        with self._lock:
            if key in self._blobs:
                return True
            return self._aside is not None and self._aside.has_blob(key)

    def claim_blob(self, key: str) -> bool:
        return self.has_blob(key)

    def delete_blob_unclaimed(self, key: str, since: float) -> bool:
        self.delete_blob(key)  # the run's own, never pruned
        return True

    def delete_blob(self, key: str) -> None:
        with self._lock:
            data = self._blobs.pop(key, None)
            if data is not None:
                self._bytes -= len(data)
                _add(-len(data))
            elif self._aside is not None:
                self._aside.delete_blob(key)

    def iter_blobs(self) -> Iterator[str]:
        with self._lock:
            keys = sorted(self._blobs)
            aside = self._aside
        if aside is not None:
            keys = sorted({*keys, *aside.iter_blobs()})
        return iter(keys)

    def read_events_bytes(self, run_id: str) -> bytes:
        writer = self.held_writer(run_id)
        if writer is not None:
            return b"".join(writer.held())
        return self.spill().read_events_bytes(run_id)

    def begin(self, manifest: Manifest) -> RunWriter:
        """A writer holding the run's events and manifest in memory."""
        writer = HeldWriter(self, manifest)
        with self._lock:
            if self._aside is not None:
                writer._spill(self._aside)
            self._writers.append(writer)
        return writer

    def resume(self, run_id: str) -> RunWriter:
        return self.spill().resume(run_id)

    def save_raw(
        self, manifest: Manifest, events: bytes | Path, *, overwrite: bool = False
    ) -> None:
        self.spill().save_raw(manifest, events, overwrite=overwrite)

    def exists(self, run_id: str) -> bool:
        return self.spill().exists(run_id)

    def read_manifest_bytes(self, run_id: str) -> bytes:
        return self.spill().read_manifest_bytes(run_id)

    def open_events(self, run_id: str) -> IO[bytes] | None:
        return self.spill().open_events(run_id)

    def run_ids(self) -> list[str]:
        return self.spill().run_ids()

    def run_bytes(self, run_id: str) -> int:
        return self.spill().run_bytes(run_id)

    def put_run_file(self, run_id: str, name: str, data: bytes) -> None:
        self.spill().put_run_file(run_id, name, data)

    def get_run_file(self, run_id: str, name: str) -> bytes | None:
        return self.spill().get_run_file(run_id, name)

    def delete(self, run_id: str) -> None:
        self.spill().delete(run_id)

    def clean_stale(self, max_age: float = 0.0, now: float | None = None) -> int:
        return 0


class HeldWriter(RunWriter):
    """A run's writer whose event lines and manifest stay in memory until its store
    spills (see :class:`HeldStore`); then it appends to the run's log aside as a
    :class:`~sandbox.snapshot.store.RunWriter` does."""

    def __init__(self, store: HeldStore, manifest: Manifest) -> None:
        self.manifest = manifest
        self._store = store
        self._lines: list[bytes | Callable[[], bytes]] = []
        self._clean = 0
        """``_lines[:_clean]`` are made and redacted; those after it wait for
        :attr:`_redact` (a callable: a line to make first)."""
        self._redact: Callable[[bytes], bytes] | None = None
        self._inner: RunWriter | None = None
        self._closed = False
        self._dropped = False
        """The run was let go (:meth:`HeldStore.discard`): what comes later is not held."""
        self.holds_manifest = False
        """Updates of the manifest stay in memory even once spilled (a run's, while it runs:
        it is written once, when the run ends kept)."""
        self.clean: Callable[[Manifest], Manifest] | None = None
        """Makes the manifest fit to leave memory (redacts it), when it is held as the run
        made it: applied to it whenever it is written (spilled, updated once spilled,
        published); ``None``: it is held fit already."""

    def _out(self, manifest: Manifest) -> Manifest:
        """``manifest`` as it may be written (see :attr:`clean`)."""
        return manifest if self.clean is None else self.clean(manifest)

    def _spill(self, aside: AsideStore) -> None:
        """Write the run folder aside (the manifest as it stands, the lines held) and
        append there from now on (called by the store, under its lock)."""
        if self._inner is not None:
            return
        self._redact_pending()
        inner = aside.begin(self._out(self.manifest))
        for line in self._lines:
            assert isinstance(line, bytes)  # made
            inner.append_raw(line)
        self._lines, self._clean = [], 0
        if self._closed:
            inner.close(durable=False)
        self._inner = inner

    def _drop(self) -> None:
        self._lines, self._clean = [], 0
        self._closed = self._dropped = True
        if self._inner is not None:
            with contextlib.suppress(OSError):
                self._inner.close(durable=False)

    def _spilled(self) -> RunWriter:
        self._store.spill()
        assert self._inner is not None  # the store spilled its writers
        return self._inner

    @property
    def folder(self) -> Path:
        """The run's folder aside (made when asked)."""
        return self._spilled().folder

    @folder.setter
    def folder(self, value: Path) -> None:  # RunWriter's attribute; never set here
        raise AttributeError("a held run's folder is made by its store")

    def append_pending(
        self,
        line: bytes | Callable[[], bytes],
        redact: Callable[[bytes], bytes],
        size: int = 0,
    ) -> None:
        """Hold ``line`` (a line, or what makes it), to be made and redacted with
        ``redact`` if it leaves memory; once spilled, append it aside at once."""
        if self._inner is None:
            with self._store._lock:
                if self._dropped:
                    return
                if self._inner is None:
                    self._redact = redact
                    self._lines.append(line)
                    # a spill makes and redacts it with the others
                    self._store.hold(len(line) if isinstance(line, bytes) else size)
                    return
        self._inner.append_pending(line, redact, size)

    @property
    def holds_lines(self) -> bool:  # type: ignore[override]
        """Whether the log is still in memory (not spilled)."""
        return self._inner is None

    def append_raw(self, line: bytes) -> None:
        inner = self._inner
        if inner is None:
            with self._store._lock:
                inner = self._inner
                if self._dropped:
                    return
                if inner is None:
                    self._store.make_held()
                    self._lines.append(line)
                    self._clean = len(self._lines)
                    self._store.hold(len(line))
                    return
        inner.append_raw(line)

    def _redact_pending(self) -> None:
        """Make and redact the lines held that are not yet (under the store's lock, by
        :meth:`HeldStore.make_held`); a line made empty is left out."""
        lines, redact = self._lines, self._redact
        if redact is not None:
            made = (line if isinstance(line, bytes) else line() for line in lines[self._clean :])
            lines[self._clean :] = [redact(line) for line in made if line]
        self._clean = len(lines)

    def redact_held(self) -> None:
        """Make and redact the lines held that are not yet: the redactor learns the secrets
        they show (call it before sealing the run)."""
        with self._store._lock:
            self._store.make_held()

    @property
    def log(self) -> IO[bytes]:
        return self._spilled().log

    def tally(self) -> LogTally | None:
        """What the writer appended to its log aside; ``None`` while the log is in memory
        (it is read from the store: :meth:`HeldStore.read_events_bytes`)."""
        inner = self._inner
        return inner.tally() if inner is not None else None

    def replace_events(self, data: bytes) -> None:
        with self._store._lock:
            if self._inner is None:
                self.replace_lines(data.splitlines(keepends=True))
                return
        self._inner.replace_events(data)

    def replace_lines(self, lines: list[bytes]) -> None:
        """Replace the log with ``lines`` (each ending in a newline): the one held in
        memory, or the one aside if the run has spilled."""
        with self._store._lock:
            if self._inner is None:
                before = sum(len(line) for line in self.held())
                self._lines = list(lines)
                self._clean = len(self._lines)
                self._store.hold(sum(len(line) for line in lines) - before)
                return
        self._inner.replace_events(b"".join(lines))

    def update_manifest(self, manifest: Manifest, *, durable: bool = True) -> None:
        """Hold the manifest; once spilled, also write it (atomically), unless
        :attr:`holds_manifest`."""
        self.manifest = manifest
        inner = self._inner
        if inner is not None and not self.holds_manifest:
            inner.update_manifest(self._out(manifest), durable=durable)

    def finish(self, manifest: Manifest) -> Manifest:
        sealed = self._spilled().finish(self._out(manifest))
        self.manifest = sealed
        return sealed

    def close(self, *, durable: bool = True) -> None:
        self._closed = True
        if self._inner is not None:
            self._inner.close(durable=durable)

    def held(self) -> list[bytes]:
        """The event lines held in memory, made and redacted (none once spilled)."""
        with self._store._lock:
            self._store.make_held()
            return [line for line in self._lines if isinstance(line, bytes)]
