"""A store in object storage, worked through a local spool.

:class:`SpooledStore` is what ``--store s3://BUCKET/PREFIX`` opens. Every write lands first
in a local folder store (the spool: ``$SANDBOX_SPOOL``, by default under the user's cache
folder), so a capture never waits on the network; a background thread uploads each run
once it is finished (complete, or left behind by a capture that died), blobs first and the
manifest last (:meth:`ObjectStore.publish`). A run is uploaded while its spooled manifest
differs from the one last sent (``.synced/<run_id>`` holds that manifest's SHA-256), so a
crash or an outage loses nothing: the next process that opens the store sends what is left.

A spooled run belongs to one store: ``.destination/<run_id>`` records it (endpoint, bucket and
prefix: :attr:`ObjectStore.destination`), written before the run itself. A store sees, sends
and deletes only the spooled runs recorded for it, so one ``$SANDBOX_SPOOL`` may serve several
stores; a run spooled for another is refused by name. An upload never replaces a run
published by someone else (one whose manifest is not the one this spool last sent).

Reads come from the spool when the run is there and from the object store otherwise: a
manifest alone for listings, the whole run (event log and blobs, checked by their SHA-256)
when its events are asked for. Commands that hand the store's folder to a child process or a
container therefore work unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO

from sandbox.errors import IntegrityError, SandboxError, StoreError, UnknownRunError
from sandbox.names import SPOOL_ENV
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.listing import run_state
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.objstore import ObjectStore, S3Location
from sandbox.snapshot.store import (
    MANIFEST,
    DirectoryStore,
    RunWriter,
    atomic_write,
    parse_events,
    parse_manifest,
    read_manifest_bytes,
    store_writes,
    unknown_run,
)

SYNCED = ".synced"
DESTINATION = ".destination"
RETRY_EVERY = 5.0
"""Seconds between two attempts of the uploader while the object store cannot be reached."""
EXIT_WAIT = 60.0
"""Seconds a finishing process gives its uploads before it leaves them to the next start."""


def default_spool(url: str) -> Path:
    """``$SANDBOX_SPOOL``, or a folder per location under the user's cache folder."""
    if configured := os.environ.get(SPOOL_ENV):
        return Path(configured)
    loc = S3Location.parse(url)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "sandbox-replayer" / "spool" / loc.bucket / (loc.prefix or "_")


class SpoolWriter(RunWriter):
    """A :class:`RunWriter` that wakes the uploader when the run's manifest is final."""

    def __init__(
        self,
        folder: Path,
        manifest: Manifest,
        on_final: Callable[[], None],
        log: IO[bytes] | None = None,
    ) -> None:
        super().__init__(folder, manifest, log)
        self._on_final = on_final

    def update_manifest(self, manifest: Manifest, *, durable: bool = True) -> None:
        super().update_manifest(manifest, durable=durable)
        if manifest.status == "complete":
            self._on_final()


class SpooledStore(DirectoryStore):
    """An object store (``s3://``) with a local spool in front of it."""

    def __init__(
        self,
        url: str,
        spool: str | os.PathLike[str] | None = None,
        *,
        remote: ObjectStore | None = None,
        background: bool = True,
        exit_wait: float = EXIT_WAIT,
    ) -> None:
        super().__init__(spool if spool is not None else default_spool(url))
        self.url = url
        self.location = url
        self.remote = remote or ObjectStore(url)
        self.destination = self.remote.destination
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.last_error: SandboxError | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(
                target=_upload_loop, args=(weakref.ref(self),), name="sandbox-upload", daemon=True
            )
            self._thread.start()
            atexit.register(self.close, exit_wait)

    def __repr__(self) -> str:
        return f"SpooledStore({self.url!r}, spool={str(self.root)!r})"

    # --- uploads -------------------------------------------------------------------------

    def _synced_path(self, run_id: str) -> Path:
        return self.root / SYNCED / run_id

    def _destination_path(self, run_id: str) -> Path:
        return self.root / DESTINATION / run_id

    def _recorded_destination(self, run_id: str) -> str | None:
        try:
            return self._destination_path(run_id).read_text().strip()
        except OSError:
            return None

    def _owns(self, run_id: str) -> bool:
        """The run is in the spool, recorded for this store."""
        return (
            os.path.lexists(self.run_dir(run_id))
            and self._recorded_destination(run_id) == self.destination
        )

    def _claim(self, run_id: str) -> bool:
        """Record the run for this store before it is written; False when it was already.
        A run spooled for another store is refused."""
        if os.path.lexists(self.run_dir(run_id)):
            recorded = self._recorded_destination(run_id)
            if recorded != self.destination:
                raise StoreError(
                    f"run {run_id!r} is spooled in {self.root} for "
                    f"{recorded or 'an unrecorded store'}, not for {self.destination}: "
                    f"give each store a spool of its own (${SPOOL_ENV})"
                )
            return False
        path = self._destination_path(run_id)
        if self._recorded_destination(run_id) == self.destination:
            return False
        with store_writes(self.root):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, self.destination.encode() + b"\n")
        return True

    def _unclaim(self, run_id: str) -> None:
        """Forget the record of a run that was not written after all."""
        if not os.path.lexists(self.run_dir(run_id)):
            with contextlib.suppress(FileNotFoundError):
                self._destination_path(run_id).unlink()

    def _local_ids(self) -> list[str]:
        return [r for r in DirectoryStore.run_ids(self) if self._owns(r)]

    def _local_manifest_bytes(self, run_id: str) -> bytes | None:
        try:
            return read_manifest_bytes(self.run_dir(run_id) / MANIFEST)
        except OSError:
            return None

    def pending(self) -> list[str]:
        """Spooled runs not (or not in this state) in the object store, finished or not."""
        waiting = []
        for run_id in self._local_ids():
            data = self._local_manifest_bytes(run_id)
            try:
                synced = self._synced_path(run_id).read_text().strip()
            except OSError:
                synced = ""
            if data is not None and sha256_bytes(data) != synced:
                waiting.append(run_id)
        return waiting

    def _ready(self, run_id: str) -> bool:
        """Finished: complete, or left ``running`` by a capture that is gone."""
        try:
            manifest = DirectoryStore.load_manifest(self, run_id)
        except (SandboxError, OSError):
            return False
        return run_state(manifest) != "running"

    def upload(self, run_id: str) -> bool:
        """Send one spooled run (blobs, events, manifest last); False when it was unchanged.
        A run spooled for another store, or published here by someone else, is not sent."""
        with self._lock:
            data = self._local_manifest_bytes(run_id)
            if data is None or not self._owns(run_id):
                return False
            digest = sha256_bytes(data)
            marker = self._synced_path(run_id)
            try:
                synced = marker.read_text().strip()
            except OSError:
                synced = ""
            if synced == digest:
                return False
            published = self.remote.published_manifest(run_id)
            if published is not None and sha256_bytes(published) != synced:
                raise StoreError(
                    f"run {run_id!r} in {self.url} is not the one spooled in {self.root}: "
                    "not replaced (it stays in the spool)"
                )
            snapshot = DirectoryStore.load(self, run_id)
            events = DirectoryStore.read_events_bytes(self, run_id)
            self.remote.publish(
                snapshot.manifest, events, snapshot.blob_refs(), self.get_verified_blob
            )
            marker.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(marker, digest.encode() + b"\n")
            return True

    def flush(self) -> list[str]:
        """Upload every finished spooled run now; return the ids sent. A run that cannot be
        sent stays spooled and the first error is raised after the others were tried."""
        sent, failed = [], None
        for run_id in self.pending():
            if not self._ready(run_id):
                continue
            try:
                if self.upload(run_id):
                    sent.append(run_id)
            except SandboxError as exc:
                failed = failed or exc
        self.last_error = failed
        if failed is not None:
            raise failed
        return sent

    def kick(self) -> None:
        """Wake the background uploader."""
        self._wake.set()

    def close(self, wait: float = 0.0) -> None:
        """Stop the uploader, giving pending uploads up to ``wait`` seconds first (what is
        left stays spooled for the next start)."""
        if self._thread is None or self._stop.is_set():
            return
        if wait > 0:
            done = threading.Event()

            def last_flush() -> None:
                with contextlib.suppress(SandboxError):
                    self.flush()
                done.set()

            threading.Thread(target=last_flush, daemon=True).start()
            done.wait(wait)
        self._stop.set()
        self._wake.set()
        atexit.unregister(self.close)

    # --- writes --------------------------------------------------------------------------

    def begin(self, manifest: Manifest) -> RunWriter:
        # No look-up in the object store here: a capture must not wait on the network.
        claimed = self._claim(manifest.run_id)
        try:
            writer = super().begin(manifest)
        except BaseException:
            if claimed:
                self._unclaim(manifest.run_id)
            raise
        return SpoolWriter(writer.folder, writer.manifest, self.kick, writer.log)

    def save_raw(
        self, manifest: Manifest, events: bytes | Path, *, overwrite: bool = False
    ) -> None:
        if not overwrite and self.remote.exists(manifest.run_id):
            raise StoreError(f"run {manifest.run_id!r} already exists in {self.url}")
        self.remote.check_bucket()
        claimed = self._claim(manifest.run_id)
        try:
            super().save_raw(manifest, events, overwrite=overwrite)
        except BaseException:
            if claimed:
                self._unclaim(manifest.run_id)
            raise
        self.kick()

    def delete(self, run_id: str) -> None:
        found = False
        if self.remote.exists(run_id):
            self.remote.delete(run_id)
            found = True
        if self._owns(run_id):
            DirectoryStore.delete(self, run_id)
            found = True
            for marker in (self._synced_path(run_id), self._destination_path(run_id)):
                with contextlib.suppress(FileNotFoundError):
                    marker.unlink()
        if not found:
            raise UnknownRunError(f"no run {run_id!r} in store {self.url}")

    # --- reads ---------------------------------------------------------------------------

    def exists(self, run_id: str) -> bool:
        return (DirectoryStore.exists(self, run_id) and self._owns(run_id)) or self.remote.exists(
            run_id
        )

    def run_ids(self) -> list[str]:
        return sorted(set(self._local_ids()) | set(self.remote.run_ids()))

    def list(self) -> list[Manifest]:
        local = DirectoryStore.list(self)
        here = {m.run_id for m in local}
        remote = []
        for run_id in self.remote.run_ids():
            if run_id not in here:
                with contextlib.suppress(SandboxError):
                    remote.append(self.remote.manifest(run_id))
        return sorted([*local, *remote], key=lambda m: (m.created, m.run_id))

    def load_manifest(self, run_id: str) -> Manifest:
        return parse_manifest(self.read_manifest_bytes(run_id), f"{run_id}/{MANIFEST}")

    def _require(self, run_id: str) -> Path:
        if not self._owns(run_id):
            if not self.remote.exists(run_id):
                raise unknown_run(self, run_id)
            self.pull(run_id)
        return super()._require(run_id)

    def pull(self, run_id: str) -> None:
        """Copy a published run into the spool (its blobs checked against their SHA-256)."""
        manifest = self.remote.manifest(run_id)
        events = self.remote.events(run_id)
        parsed = parse_events(events, allow_torn_tail=manifest.status == "running")
        from sandbox.snapshot.snapshot import Snapshot

        for key in sorted(Snapshot(manifest, parsed).blob_refs()):
            self.get_blob(key)
        with self._lock:
            self._claim(run_id)
            DirectoryStore.save_raw(self, manifest, events, overwrite=True)
            marker = self._synced_path(run_id)
            marker.parent.mkdir(parents=True, exist_ok=True)
            data = read_manifest_bytes(self.run_dir(run_id) / MANIFEST)
            atomic_write(marker, sha256_bytes(data).encode() + b"\n")

    def _fetch_blob(self, key: str) -> None:
        """Copy a blob of the object store into the spool, checked against its SHA-256."""
        if DirectoryStore.has_blob(self, key):
            return
        data = self.remote.get_blob(key)
        if data is None:
            raise StoreError(f"blob {key} is not in the store {self.url}")
        if sha256_bytes(data) != key:
            raise IntegrityError(f"blob {key}: content does not match its SHA-256")
        DirectoryStore.put_blob(self, data)
        # A copy read from the object store is no run's claim on it (see claim_blob): dated
        # as of long ago, so that a pruning decides by the object store's own time.
        with contextlib.suppress(OSError):
            os.utime(self.blob_path(key), (0, 0), follow_symlinks=False)

    def get_blob(self, key: str) -> bytes:
        self._fetch_blob(key)
        return self.blob_path(key).read_bytes()

    def open_blob(self, key: str) -> IO[bytes]:
        self._fetch_blob(key)
        return self.blob_path(key).open("rb")

    def read_manifest_bytes(self, run_id: str) -> bytes:
        """The manifest as stored: the spool's copy, else the object store's (alone)."""
        if self._owns(run_id):
            return read_manifest_bytes(self._require(run_id) / MANIFEST)
        return self.remote.manifest_bytes(run_id)

    def run_bytes(self, run_id: str) -> int:
        """Bytes of the run's files in the spool (0 for a run only in the object store:
        measuring it would read its event log)."""
        if not self._owns(run_id):
            return 0
        return sum(p.stat().st_size for p in self.run_dir(run_id).iterdir() if p.is_file())

    def has_blob(self, key: str) -> bool:
        return DirectoryStore.has_blob(self, key) or self.remote.has_blob(key)

    def delete_blob(self, key: str) -> None:
        """Remove a blob from the object store and the spool."""
        self.remote.delete_blob(key)
        DirectoryStore.delete_blob(self, key)

    def claim_blob(self, key: str) -> bool:
        return DirectoryStore.claim_blob(self, key) or self.remote.claim_blob(key)

    def delete_blob_unclaimed(self, key: str, since: float) -> bool:
        """From the object store, then from the spool (each unless claimed there)."""
        return self.remote.delete_blob_unclaimed(key, since) and (
            DirectoryStore.delete_blob_unclaimed(self, key, since)
        )


def _upload_loop(ref: weakref.ref[SpooledStore]) -> None:
    """The background uploader: send what is finished, then wait for a wake-up (a run that
    finished) or, after a failure, retry a little later."""
    while True:
        store = ref()
        if store is None or store._stop.is_set():
            return
        with contextlib.suppress(SandboxError, OSError):
            store.flush()
        wake, stop = store._wake, store._stop
        wait = RETRY_EVERY if store.last_error is not None else None
        del store
        wake.wait(wait)
        wake.clear()
        if stop.is_set():
            return
