"""One-file bundles: a run, its event log and only the blobs it references, in a tar.gz.

Layout of a bundle (``bundle.json`` first, then the other members sorted by path)::

    bundle.json                      the index: format, schema version, run id, and the
                                     path, SHA-256 and size of every other member
    blobs/sha256/<ab>/<sha256>       each blob the run references
    runs/<run_id>/events.jsonl
    runs/<run_id>/manifest.json

Export is deterministic (sorted members, mtime 0, uid/gid 0, no names in the gzip header)
and atomic (a temporary file, then a rename). Import treats the file as hostile: members are
streamed, never extracted; only regular files with exactly the expected names are accepted;
sizes, totals and the member count are limited while reading; every hash is checked; and the
store is written only once everything has checked.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Literal

from pydantic import Field, ValidationError

from sandbox.errors import (
    BundleError,
    IntegrityError,
    SandboxError,
    SchemaVersionError,
    SnapshotError,
    StoreError,
)
from sandbox.snapshot.events import SHA256_PATTERN, Strict
from sandbox.snapshot.hashing import canonical_json, sha256_bytes, sha256_file
from sandbox.snapshot.integrity import (
    BlobInfo,
    Integrity,
    Problem,
    blob_member,
    check_run_files,
    check_store_run,
    run_path,
)
from sandbox.snapshot.manifest import RUN_ID_PATTERN, SCHEMA_VERSION, Provenance
from sandbox.snapshot.store import (
    EVENTS,
    MANIFEST,
    Store,
    atomic_file,
    parse_manifest,
    read_manifest_bytes,
    store_writes,
)
from sandbox.snapshot.targuard import TarGuard, shown

BUNDLE_INDEX = "bundle.json"
BUNDLE_FORMAT: Literal["sandbox-replayer-bundle"] = "sandbox-replayer-bundle"

_ID = RUN_ID_PATTERN.removeprefix("^").removesuffix("$")
_RUN_MEMBER = re.compile(rf"runs/(?P<run>{_ID})/(?P<file>manifest\.json|events\.jsonl)")
_BLOB_MEMBER = re.compile(r"blobs/sha256/(?P<ab>[0-9a-f]{2})/(?P<sha>[0-9a-f]{64})")
_TAR_OVERHEAD = 1536
"""Most bytes a tar stream spends around one member (header and padding)."""
_TAR_TRAILER = 20480
_CHUNK = 1024 * 1024


class BundleMember(Strict):
    path: str
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)]
    size: Annotated[int, Field(ge=0)]


class BundleIndex(Strict):
    """``bundle.json``: what the bundle holds, so that every member can be checked."""

    format: Literal["sandbox-replayer-bundle"] = BUNDLE_FORMAT
    schema_version: int = SCHEMA_VERSION
    run_id: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    members: list[BundleMember]


@dataclass(frozen=True)
class BundleLimits:
    """Limits applied while reading a bundle, against decompression bombs."""

    max_member_bytes: int = 512 * 1024 * 1024
    max_total_bytes: int = 2 * 1024 * 1024 * 1024
    max_members: int = 100_000


DEFAULT_LIMITS = BundleLimits()


@dataclass(frozen=True)
class Staged:
    """A member of a bundle copied to a temporary file, hashed on the way."""

    path: Path
    sha256: str
    size: int


@dataclass
class BundleContents:
    """The members of a bundle, streamed to temporary files (never held in memory), their
    names already checked. Close it (or use ``with``) to remove the files."""

    source: str
    index: BundleIndex | None
    files: dict[str, Staged]
    folder: tempfile.TemporaryDirectory[str] | None = None

    def run_ids(self) -> set[str]:
        return {m["run"] for p in self.files if (m := _RUN_MEMBER.fullmatch(p))}

    def read(self, name: str) -> bytes | None:
        """A small member's bytes (the manifest), refused unread when too large."""
        staged = self.files.get(name)
        return None if staged is None else read_manifest_bytes(staged.path)

    def close(self) -> None:
        if self.folder is not None:
            self.folder.cleanup()
            self.folder = None

    def __enter__(self) -> BundleContents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- export ------------------------------------------------------------------------------


def export_bundle(
    store: Store, run_id: str, out_path: str | os.PathLike[str], *, check: Integrity | None = None
) -> Path:
    """Write run ``run_id`` of ``store`` and the blobs it references to one ``.tar.gz``.

    The run is checked first (``check``: a check of it the caller made already): a run that
    fails verification is not exported."""
    if check is None:
        check = check_store_run(store, run_id)
    if not check.ok:
        raise IntegrityError(
            f"run {run_id!r} fails verification, not exported: {_summary(check.problems)}; "
            f"see `sandbox verify {run_id}`"
        )
    files: dict[str, bytes] = {
        run_path(run_id, MANIFEST): store.read_manifest_bytes(run_id),
        run_path(run_id, EVENTS): store.read_events_bytes(run_id),
    }
    for key in sorted(check.blob_keys):
        files[blob_member(key)] = store.get_verified_blob(key)
    index = BundleIndex(
        run_id=run_id,
        members=[
            BundleMember(path=path, sha256=sha256_bytes(data), size=len(data))
            for path, data in sorted(files.items())
        ],
    )
    members = [(BUNDLE_INDEX, canonical_json(index.model_dump(mode="json")) + b"\n")]
    members += sorted(files.items())

    out = Path(out_path).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        atomic_file(out) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in members:
            tar.addfile(_tarinfo(name, len(data)), io.BytesIO(data))
    return out


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


# --- reading an untrusted bundle ------------------------------------------------------------


class _LimitedReader:
    """A read-only stream that fails once more than ``limit`` bytes have been read."""

    def __init__(self, inner: io.BufferedIOBase | gzip.GzipFile, limit: int, source: str):
        self.inner = inner
        self.limit = limit
        self.count = 0
        self.source = source

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self.limit - self.count + 1
        data = self.inner.read(min(size, self.limit - self.count + 1))
        self.count += len(data)
        if self.count > self.limit:
            raise BundleError(
                f"{self.source}: refused: decompresses to more than {self.limit} bytes"
            )
        return data


def _check_name(name: str, source: str) -> None:
    if name.startswith("/") or name.startswith("\\") or re.match(r"^[A-Za-z]:", name):
        raise BundleError(f"{source}: refused: member {shown(name)} has an absolute path")
    if ".." in re.split(r"[/\\]", name):
        raise BundleError(f"{source}: refused: member {shown(name)} climbs out with '..'")
    if name == BUNDLE_INDEX or _RUN_MEMBER.fullmatch(name):
        return
    blob = _BLOB_MEMBER.fullmatch(name)
    if blob and blob["sha"].startswith(blob["ab"]):
        return
    raise BundleError(
        f"{source}: refused: unexpected member {shown(name)} (expected {BUNDLE_INDEX}, "
        "runs/<id>/{manifest.json,events.jsonl}, blobs/sha256/<ab>/<sha256>)"
    )


def _parse_index(data: bytes, source: str) -> BundleIndex:
    where = f"{source}: {BUNDLE_INDEX}"
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise BundleError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise BundleError(f"{where}: expected a JSON object")
    if raw.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{where}: format is {raw.get('format')!r}, expected {BUNDLE_FORMAT!r}")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(version, SCHEMA_VERSION, where)
    try:
        return BundleIndex.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "value"
        raise BundleError(f"{where}: {loc}: {err['msg']}") from None


def bundle_source(path: str | os.PathLike[str]) -> str:
    """How errors name a bundle file: its path, cut when very long."""
    text = os.fspath(path)
    return text if len(text) <= 200 else text[:199] + "…"


def read_bundle(
    path: str | os.PathLike[str], limits: BundleLimits = DEFAULT_LIMITS
) -> BundleContents:
    """Stream the members of an untrusted bundle to temporary files, refusing anything
    unexpected.

    Checks names, member types, duplicates and limits (tar headers are checked by
    :class:`~sandbox.snapshot.targuard.TarGuard` before :mod:`tarfile` parses them), and
    parses ``bundle.json`` (a newer schema version raises :class:`SchemaVersionError`).
    Memory stays bounded whatever the file: the members go to a temporary folder.
    Contents are not checked here."""
    source = bundle_source(path)
    folder = tempfile.TemporaryDirectory(prefix="sandbox-bundle-")
    contents = BundleContents(source, None, {}, folder)
    try:
        _stream_members(path, contents, Path(folder.name), limits)
    except BaseException:
        contents.close()
        raise
    return contents


def _stream_members(
    path: str | os.PathLike[str], contents: BundleContents, folder: Path, limits: BundleLimits
) -> None:
    source = contents.source
    files = contents.files
    total = 0
    count = 0
    stream_limit = limits.max_total_bytes + limits.max_members * _TAR_OVERHEAD + _TAR_TRAILER
    try:
        with (
            open(path, "rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as gz,
        ):
            limited = _LimitedReader(gz, stream_limit, source)
            guard = TarGuard(limited, source, max_headers=3 * limits.max_members + 3)
            with tarfile.open(fileobj=guard, mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    count += 1
                    if count > limits.max_members:
                        raise BundleError(
                            f"{source}: refused: more than {limits.max_members} members"
                        )
                    name = member.name
                    _check_name(name, source)
                    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
                        raise BundleError(
                            f"{source}: refused: member {shown(name)} is not a regular file "
                            "(links, devices, fifos and folders are not accepted)"
                        )
                    if name in files:
                        raise BundleError(f"{source}: refused: member {shown(name)} appears twice")
                    if member.size > limits.max_member_bytes:
                        raise BundleError(
                            f"{source}: refused: member {shown(name)} is {member.size} bytes, "
                            f"more than the limit of {limits.max_member_bytes}"
                        )
                    if total + member.size > limits.max_total_bytes:
                        raise BundleError(
                            f"{source}: refused: members add up to more than "
                            f"{limits.max_total_bytes} bytes"
                        )
                    if count == 1 and name != BUNDLE_INDEX:
                        raise BundleError(
                            f"{source}: refused: {BUNDLE_INDEX}: missing as the first member "
                            "(its sizes are checked before anything else is read)"
                        )
                    if contents.index is not None:
                        _check_declared(contents.index, name, member.size, source)
                    fileobj = tar.extractfile(member)
                    if fileobj is None:  # pragma: no cover - regular files always have data
                        raise BundleError(f"{source}: member {shown(name)} has no data")
                    with store_writes(folder):
                        staged = _stage(fileobj, folder / str(count), member.size)
                    if staged.size != member.size:
                        raise BundleError(f"{source}: member {shown(name)} is truncated")
                    total += staged.size
                    files[name] = staged
                    if name == BUNDLE_INDEX:
                        index_bytes = read_manifest_bytes(staged.path)
                        contents.index = _parse_index(index_bytes, source)
                        _check_sizes(contents.index, folder, limits, source)
                    elif _BLOB_MEMBER.fullmatch(name) and staged.sha256 != name[-64:]:
                        # Its digest and size are all the checks need: garbage is not kept.
                        staged.path.unlink()
    except SandboxError:
        raise
    except FileNotFoundError:
        raise BundleError(f"no bundle file {source}") from None
    except IsADirectoryError:
        raise BundleError(f"{source} is a folder, expected a bundle file (.tar.gz)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise BundleError(f"{source}: not a gzip-compressed bundle ({_short(exc)})") from None
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError) as exc:
        raise BundleError(
            f"{source}: damaged or not a bundle ({type(exc).__name__}: {_short(exc)})"
        ) from None
    if count == 0:
        raise BundleError(f"{source}: empty archive, not a bundle")
    files.pop(BUNDLE_INDEX, None)


def _check_sizes(index: BundleIndex, folder: Path, limits: BundleLimits, source: str) -> None:
    """Refuse a bundle whose index declares more than the limits allow, or more than the
    temporary folder can hold, before any other member is staged."""
    if len(index.members) + 1 > limits.max_members:
        raise BundleError(
            f"{source}: refused: more than {limits.max_members} members "
            f"({BUNDLE_INDEX} lists {len(index.members)})"
        )
    for entry in index.members:
        if entry.size > limits.max_member_bytes:
            raise BundleError(
                f"{source}: refused: {BUNDLE_INDEX} says member {shown(entry.path)} is "
                f"{entry.size} bytes, more than the limit of {limits.max_member_bytes}"
            )
    declared = sum(entry.size for entry in {e.path: e for e in index.members}.values())
    if declared > limits.max_total_bytes:
        raise BundleError(
            f"{source}: refused: members add up to more than {limits.max_total_bytes} bytes "
            f"({BUNDLE_INDEX} says {declared})"
        )
    free = shutil.disk_usage(folder).free
    if declared > free:
        raise BundleError(
            f"{source}: needs {declared} bytes of temporary space, {free} are free in "
            f"{folder.parent} (set TMPDIR to a larger folder)"
        )


def _check_declared(index: BundleIndex, name: str, size: int, source: str) -> None:
    """Refuse a member that ``bundle.json`` does not list with this size, before it is
    staged."""
    sizes = {entry.size for entry in index.members if entry.path == name}
    if not sizes:
        raise BundleError(
            f"{source}: refused: member {shown(name)} is not listed in {BUNDLE_INDEX}"
        )
    if size not in sizes:
        raise BundleError(
            f"{source}: refused: member {shown(name)} is {size} bytes, {BUNDLE_INDEX} says "
            f"{min(sizes)}"
        )


def _short(exc: BaseException, limit: int = 120) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stage(fileobj: IO[bytes], target: Path, size: int) -> Staged:
    """Copy at most ``size`` bytes of ``fileobj`` to ``target``, hashing them."""
    digest = hashlib.sha256()
    written = 0
    with open(target, "wb") as out:
        while written < size:
            chunk = fileobj.read(min(_CHUNK, size - written))
            if not chunk:
                break
            digest.update(chunk)
            out.write(chunk)
            written += len(chunk)
    return Staged(target, digest.hexdigest(), written)


def check_bundle(contents: BundleContents) -> tuple[str | None, Integrity | None, list[Problem]]:
    """Check the contents of a bundle against its index, and the run inside it.

    Returns the run id, the run check, and the problems of the bundle's own structure."""
    problems: list[Problem] = []
    index = contents.index
    if index is None:
        return None, None, [Problem(BUNDLE_INDEX, "missing: not a sandbox-replayer bundle")]
    run_id = index.run_id
    listed: dict[str, BundleMember] = {}
    for entry in index.members:
        if entry.path in listed:
            problems.append(Problem(BUNDLE_INDEX, f"lists {entry.path!r} twice"))
        listed[entry.path] = entry
    for path in sorted(set(listed) - set(contents.files)):
        problems.append(Problem(path, f"listed in {BUNDLE_INDEX} but not in the bundle"))
    for path, staged in sorted(contents.files.items()):
        listing = listed.get(path)
        if listing is None:
            problems.append(Problem(path, f"not listed in {BUNDLE_INDEX}"))
            continue
        if listing.size != staged.size:
            problems.append(
                Problem(path, f"size is {staged.size} bytes, {BUNDLE_INDEX} says {listing.size}")
            )
        elif staged.sha256 != listing.sha256:
            problems.append(Problem(path, f"sha256 differs from {BUNDLE_INDEX}"))
    for other in sorted(contents.run_ids() - {run_id}):
        problems.append(
            Problem(f"runs/{other}/", f"belongs to run {other!r}, the bundle is of {run_id!r}")
        )

    def lookup(key: str) -> BlobInfo | None:
        staged = contents.files.get(blob_member(key))
        return None if staged is None else (staged.sha256, staged.size)

    events = contents.files.get(run_path(run_id, EVENTS))
    try:
        manifest_bytes = contents.read(run_path(run_id, MANIFEST))
    except SnapshotError as exc:
        return run_id, None, [*problems, Problem(run_path(run_id, MANIFEST), str(exc))]
    check = check_run_files(run_id, manifest_bytes, None if events is None else events.path, lookup)
    for path in sorted(contents.files):
        blob = _BLOB_MEMBER.fullmatch(path)
        if blob and blob["sha"] not in check.blob_keys and check.manifest is not None:
            problems.append(Problem(path, "not referenced by the run"))
    return run_id, check, problems


def _summary(problems: list[Problem], limit: int = 3) -> str:
    shown = "; ".join(str(p) for p in problems[:limit])
    more = len(problems) - limit
    return shown + (f"; and {more} more" if more > 0 else "")


# --- import --------------------------------------------------------------------------------


def import_bundle(
    store: Store,
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    limits: BundleLimits = DEFAULT_LIMITS,
) -> str:
    """Import a bundle into ``store`` and return the run id.

    Nothing is written until the whole bundle has checked; then the blobs are added and the
    run folder appears at once. A run already in the store is left alone when identical to
    the bundle's, and is refused otherwise unless ``force`` replaces it.

    The imported manifest's ``provenance`` names the bundle (whatever the bundle said): the
    run is someone else's data, and replay will not run its code on this host unasked."""
    store.clean_stale()  # what killed imports left
    with read_bundle(path, limits) as contents:
        return _import_checked(store, path, contents, force=force)


def _import_checked(
    store: Store, path: str | os.PathLike[str], contents: BundleContents, *, force: bool
) -> str:
    run_id, check, problems = check_bundle(contents)
    if run_id is None or check is None:
        raise BundleError(f"{contents.source}: {_summary(problems)}")
    manifest_bytes = contents.read(run_path(run_id, MANIFEST))
    if check.manifest is None and manifest_bytes is not None:
        # Raise the manifest's own error (a newer schema version, for example) as is.
        parse_manifest(manifest_bytes, f"{contents.source}: {run_path(run_id, MANIFEST)}")
    problems = problems + check.problems
    if problems:
        raise IntegrityError(f"{contents.source} is refused: {_summary(problems)}")
    assert check.manifest is not None
    events = contents.files[run_path(run_id, EVENTS)]
    provenance = Provenance(imported_from=Path(path).name, bundle_sha256=sha256_file(path))
    manifest = check.manifest.model_copy(update={"provenance": provenance})
    if manifest.status == "complete":
        blobs = sum(contents.files[blob_member(key)].size for key in check.blob_keys)
        manifest = manifest.model_copy(
            update={
                "events_sha256": manifest.events_sha256 or check.events_sha256,
                "event_count": check.event_count
                if manifest.event_count is None
                else manifest.event_count,
                "blob_bytes": blobs,
            }
        )

    if store.exists(run_id):
        try:
            same = (
                store.load_manifest(run_id).model_copy(update={"provenance": provenance})
                == manifest
                and sha256_bytes(store.read_events_bytes(run_id)) == events.sha256
                and all(store.has_blob(key) for key in check.blob_keys)
            )
        except (SnapshotError, OSError):  # the stored run is damaged: it differs
            same = False
        if same:
            return run_id
        if not force:
            raise StoreError(
                f"run {run_id!r} is already in {store.location} and differs from the bundle's; "
                "import with --force to replace it"
            )

    added: list[str] = []
    try:
        for key in sorted(check.blob_keys):
            if not store.claim_blob(key):
                store.put_blob_file(contents.files[blob_member(key)].path, key)
                added.append(key)
        store.save_raw(manifest, events.path, overwrite=force)
    except BaseException:
        for key in added:
            with contextlib.suppress(OSError):
                store.delete_blob(key)
        raise
    return run_id


__all__ = [
    "BUNDLE_INDEX",
    "DEFAULT_LIMITS",
    "BundleContents",
    "BundleIndex",
    "BundleLimits",
    "bundle_source",
    "check_bundle",
    "export_bundle",
    "import_bundle",
    "read_bundle",
]
