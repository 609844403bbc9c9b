"""The ``files`` service kind: a workspace folder, as a tree of directories and regular files.

Endpoint: the folder's path.

Capture writes a deterministic tar (PAX format, entries in path order, modes masked to
``0o777``, owners and mtimes zeroed) of every directory and regular file, skipping what the
ignore patterns match. The patterns (default ``.git``, ``__pycache__``, ``*.pyc``) match a
name anywhere in the tree or a path relative to the folder (``build/out``); they come from
:class:`FilesKind` (``ignore=``), from the ``ignore`` argument of each method, and from a
``.sandboxignore`` file (one pattern a line, ``#`` comments) at the folder's root. The
patterns used are written into the tar's global header and into ``meta["ignore"]``.
Symbolic links, sockets and other special files are not captured: they are listed in
``meta["skipped"]`` and left out of the hash too.

Restore checks the whole archive first (relative paths only, no ``..``, regular files and
directories only, nothing under an ignored path), then empties the folder, keeping what the
patterns ignore (a ``.git`` survives a restore), and extracts without following links.
Files get the time of the restore as mtime.

The state hash is the SHA-256 of the sorted ``(relative path, mode, sha256 of content)``
triples (``None`` as content hash for a directory).

A touched capture (``--state touched``, ``keep="failed"``: :mod:`sandbox.services.files.touched`)
holds only the files the run opened for reading, each as at its first read, in the same tar
with their list in a header; a replay reaching another file is inconclusive.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import JsonValue

from sandbox.errors import ServiceError
from sandbox.services.base import DESCRIBE_LIMIT, TRUNCATED, CapturedState, register
from sandbox.services.descriptor import ContainerSpec, KindBinding
from sandbox.services.dumptext import Place
from sandbox.services.files import touched
from sandbox.snapshot.hashing import fingerprint, sha256_file

if TYPE_CHECKING:
    from sandbox.services.masking import Masker, MaskRule

DEFAULT_IGNORE: tuple[str, ...] = (".git", "__pycache__", "*.pyc")
IGNORE_FILE = ".sandboxignore"
FORMAT = "files/1"
FORMAT_KEY = "sandbox-replayer.format"
IGNORE_KEY = "sandbox-replayer.ignore"
MEDIA_TYPE = "application/x-tar"
_CHUNK = 1 << 20
_MAX_SKIPPED = 100


@dataclass(frozen=True)
class Entry:
    rel: str
    mode: int
    sha256: str | None  # None for a directory
    path: Path

    @property
    def is_dir(self) -> bool:
        return self.sha256 is None

    def key(self) -> list[JsonValue]:
        return [self.rel, f"{self.mode:04o}", self.sha256]


def is_ignored(rel: str, patterns: Sequence[str]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p) for p in patterns)


def _clean_patterns(patterns: Iterable[str]) -> list[str]:
    out: list[str] = []
    for raw in patterns:
        p = raw.strip().strip("/")
        if p and not p.startswith("#") and p not in out:
            out.append(p)
    return out


def walk(root: Path, patterns: Sequence[str]) -> tuple[list[Entry], list[str]]:
    """Every directory and regular file under ``root`` not ignored, in path order, and the
    relative paths of the special files skipped."""
    entries: list[Entry] = []
    skipped: list[str] = []

    def visit(folder: Path, prefix: str) -> None:
        with os.scandir(folder) as it:
            children = sorted(it, key=lambda e: e.name)
        for child in children:
            rel = f"{prefix}{child.name}"
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                raise ServiceError(f"file name {rel!r} in {root} is not valid UTF-8") from None
            if is_ignored(rel, patterns):
                continue
            st = child.stat(follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode) & 0o777
            if stat.S_ISDIR(st.st_mode):
                entries.append(Entry(rel, mode, None, Path(child.path)))
                visit(Path(child.path), rel + "/")
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, mode, sha256_file(child.path), Path(child.path)))
            else:
                skipped.append(rel)

    try:
        visit(root, "")
    except OSError as exc:
        raise ServiceError(f"cannot read workspace {root}: {exc}") from None
    return entries, skipped


def tree_hash(entries: Iterable[Entry]) -> str:
    return fingerprint({"kind": "files", "entries": sorted(e.key() for e in entries)})


def _check_member(member: tarfile.TarInfo, patterns: Sequence[str]) -> str:
    """The safe relative path of ``member``, or a :class:`ServiceError`."""
    name = member.name.rstrip("/") if member.isdir() else member.name
    if not (member.isreg() or member.isdir()):
        raise ServiceError(
            f"files capture: member {member.name!r} is not a regular file or directory "
            "(links and special files are refused)"
        )
    parts = PurePosixPath(name).parts
    if (
        not name
        or "\x00" in name
        or name.startswith("/")
        or "\\" in name
        or any(p in ("", ".", "..") for p in name.split("/"))
    ):
        raise ServiceError(f"files capture: unsafe member path {member.name!r}")
    for i in range(1, len(parts) + 1):
        if is_ignored("/".join(parts[:i]), patterns):
            raise ServiceError(
                f"files capture: member {member.name!r} lies under an ignored path, which a "
                "restore keeps as it is"
            )
    return name


def _make_writable(path: Path) -> None:
    for folder, _dirs, _files in os.walk(path):
        os.chmod(folder, 0o700)


def _ensure_dir(root: Path, rel: str) -> Path:
    """Create ``root/rel`` and its parents, refusing to go through anything but a directory."""
    current = root
    for part in rel.split("/"):
        current = current / part
        try:
            os.mkdir(current, 0o700)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                raise ServiceError(
                    f"files restore: {current} exists and is not a directory"
                ) from None
    return current


class FilesKind:
    """Capture a folder as a tar; restore it safely; hash paths, modes and contents."""

    name: ClassVar[str] = "files"
    binding: ClassVar[KindBinding] = KindBinding(path="folder")
    container: ClassVar[ContainerSpec | None] = None

    dump_media_types: ClassVar[frozenset[str]] = frozenset({MEDIA_TYPE})

    def mask(
        self, endpoint: str, state: CapturedState, rules: list[MaskRule], masker: Masker
    ) -> CapturedState:
        """See :mod:`sandbox.services.files.masking`."""
        from sandbox.services.files.masking import mask_files

        kept = kept_paths(state.data)  # a touched capture stays one

        def recapture(root: str) -> CapturedState:
            return self.capture(root, kept=kept)

        return mask_files(self, endpoint, state, rules, masker, recapture=recapture)

    part_label: ClassVar[str] = "file "

    def parts(self, description: Mapping[str, Any]) -> list[str]:
        files = description.get("files")
        if not isinstance(files, dict):
            return []
        return [
            f"file {name}"
            for name, entry in files.items()
            if not (isinstance(entry, dict) and entry.get("dir"))
        ]

    def remove_parts(self, endpoint: str, names: Sequence[str]) -> None:
        """Remove the files (a name outside the workspace is refused)."""
        root = Path(endpoint).resolve()
        for name in names:
            path = (root / name).resolve()
            if not path.is_relative_to(root):
                raise ServiceError(f"file {name!r} is outside the workspace")
            path.unlink(missing_ok=True)

    def dump_places(self, media_type: str, data: bytes) -> Iterator[Place]:
        """The lines of the text files of a capture."""
        from sandbox.services.files.dumptext import files_places

        return files_places(data)

    # --- touched state -------------------------------------------------------------------

    def pin(self, endpoint: str) -> PinnedWorkspace:
        """Keep the files the run in context reads, each at its first read (see
        :mod:`sandbox.services.files.touched`)."""
        root = self._existing_root(endpoint)
        base = self._base_patterns(root, None)
        patterns = self._effective(root, base)
        return PinnedWorkspace(self, str(root), base, lambda rel: is_ignored(rel, patterns))

    def captured_parts(self, meta: Mapping[str, Any]) -> list[str] | None:
        if meta.get(touched.STATE_META) != "touched" or touched.COUNT_META not in meta:
            return None
        return [str(p) for p in meta.get(touched.FILES_META) or []]

    def describe_capture(self, meta: Mapping[str, Any]) -> str | None:
        return touched.describe_meta(meta)

    def outside_capture(self, endpoint: str, captured: Collection[str]) -> list[str]:
        """The files under the workspace, outside the touched capture, that the replay
        opened in this process (the watch then stops)."""
        found = touched.watch_of(endpoint)
        if found is None:
            return [
                "read the workspace restored by another process: its reads could not be watched"
            ]
        return found.stop()

    def touched_state(
        self,
        base: Sequence[str],
        files: Mapping[str, tuple[int, bytes] | None],
        dirs: Mapping[str, int],
        meta: Mapping[str, JsonValue],
    ) -> CapturedState:
        """A tar of the present ``files`` (relative path -> mode and content) in the folders
        ``dirs``, listing every path of ``files`` as kept."""
        kept = sorted(files)
        headers = {
            FORMAT_KEY: FORMAT,
            IGNORE_KEY: json.dumps(list(base)),
            touched.TOUCHED_KEY: json.dumps(kept),
        }
        entries: list[Entry] = []
        buf = io.BytesIO()
        with tarfile.open(
            fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, pax_headers=headers
        ) as tar:
            items: list[tuple[str, int, bytes | None]] = [(d, m, None) for d, m in dirs.items()]
            items += [(rel, f[0], f[1]) for rel, f in files.items() if f is not None]
            for rel, mode, content in sorted(items):
                info = tarfile.TarInfo(rel)
                info.mode, info.mtime, info.uid, info.gid = mode, 0, 0, 0
                info.uname = info.gname = ""
                if content is None:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    entries.append(Entry(rel, mode, None, Path(rel)))
                    continue
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
                entries.append(Entry(rel, mode, touched.sha256(content), Path(rel)))
        out: dict[str, JsonValue] = {
            **meta,
            "files": sum(not e.is_dir for e in entries),
            "dirs": sum(e.is_dir for e in entries),
            "bytes": sum(len(f[1]) for f in files.values() if f is not None),
            "ignore": list(base),
        }
        return CapturedState(
            data=buf.getvalue(), state_hash=tree_hash(entries), media_type=MEDIA_TYPE, meta=out
        )

    def __init__(self, ignore: Sequence[str] = DEFAULT_IGNORE) -> None:
        self.ignore = tuple(_clean_patterns(ignore))
        self._ignore_used: dict[str, tuple[str, ...]] = {}
        self._points: dict[str, bytes] = {}

    # --- patterns ------------------------------------------------------------------------

    def _base_patterns(self, root: Path, ignore: Sequence[str] | None) -> tuple[str, ...]:
        if ignore is not None:
            return tuple(_clean_patterns(ignore))
        return self._ignore_used.get(str(root.absolute()), self.ignore)

    @staticmethod
    def _effective(root: Path, base: Sequence[str]) -> list[str]:
        extra: list[str] = []
        ignore_file = root / IGNORE_FILE
        if ignore_file.is_file() and not ignore_file.is_symlink():
            extra = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
        return _clean_patterns([*base, *extra])

    @staticmethod
    def _root(endpoint: str) -> Path:
        if not endpoint:
            raise ServiceError("files endpoint is empty: expected a folder path")
        return Path(endpoint)

    def _existing_root(self, endpoint: str) -> Path:
        root = self._root(endpoint)
        if not root.is_dir():
            raise ServiceError(f"workspace folder {root} does not exist or is not a folder")
        return root

    # --- the protocol --------------------------------------------------------------------

    def capture(
        self,
        endpoint: str,
        *,
        ignore: Sequence[str] | None = None,
        kept: Sequence[str] | None = None,
    ) -> CapturedState:
        """The whole folder; ``kept``: as a touched capture keeping those paths (masking
        one)."""
        token = touched.own()
        try:
            return self._capture(endpoint, ignore, kept)
        finally:
            touched.release(token)

    def _capture(
        self, endpoint: str, ignore: Sequence[str] | None, kept: Sequence[str] | None
    ) -> CapturedState:
        root = self._existing_root(endpoint)
        base = self._base_patterns(root, ignore)
        self._ignore_used[str(root.absolute())] = base
        entries, skipped = walk(root, self._effective(root, base))
        buf = io.BytesIO()
        headers = {FORMAT_KEY: FORMAT, IGNORE_KEY: json.dumps(list(base))}
        if kept is not None:
            headers[touched.TOUCHED_KEY] = json.dumps(sorted(kept))
        total = 0
        with tarfile.open(
            fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, pax_headers=headers
        ) as tar:
            for entry in entries:
                info = tarfile.TarInfo(entry.rel)
                info.mode = entry.mode
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if entry.is_dir:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    continue
                try:
                    content = entry.path.read_bytes()
                except OSError as exc:
                    raise ServiceError(f"cannot read {entry.path}: {exc}") from None
                if hashlib.sha256(content).hexdigest() != entry.sha256:
                    raise ServiceError(f"{entry.path} changed while the workspace was captured")
                info.size = len(content)
                total += len(content)
                tar.addfile(info, io.BytesIO(content))
        meta: dict[str, JsonValue] = {
            "files": sum(not e.is_dir for e in entries),
            "dirs": sum(e.is_dir for e in entries),
            "bytes": total,
            "ignore": list(base),
        }
        if skipped:
            meta["skipped"] = list(skipped[:_MAX_SKIPPED])
        return CapturedState(
            data=buf.getvalue(), state_hash=tree_hash(entries), media_type=MEDIA_TYPE, meta=meta
        )

    def restore(self, endpoint: str, data: bytes) -> None:
        root = self._root(endpoint)
        try:
            tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:")  # noqa: SIM115 (in memory)
            members = tar.getmembers()
        except (tarfile.TarError, EOFError) as exc:
            raise ServiceError(f"files capture is not a readable tar: {exc}") from None
        if tar.pax_headers.get(FORMAT_KEY) != FORMAT:
            raise ServiceError(
                f"not a files capture made by sandbox-replayer (expected {FORMAT_KEY}={FORMAT}, "
                f"found {tar.pax_headers.get(FORMAT_KEY)!r})"
            )
        try:
            base = json.loads(tar.pax_headers.get(IGNORE_KEY, "[]"))
            if not isinstance(base, list) or not all(isinstance(p, str) for p in base):
                raise ValueError
        except ValueError:
            raise ServiceError("files capture has an unreadable list of ignore patterns") from None
        # Check everything before touching the folder.
        names: dict[str, tarfile.TarInfo] = {}
        for member in members:
            name = _check_member(member, _clean_patterns(base))
            if name in names:
                raise ServiceError(f"files capture: member {name!r} appears twice")
            names[name] = member
        if root.exists() and not root.is_dir():
            raise ServiceError(f"workspace {root} exists and is not a folder")
        root.mkdir(parents=True, exist_ok=True)
        # What to keep is decided with the patterns in force, .sandboxignore included.
        keep = self._effective(root, base)
        dirs = {n for n, m in names.items() if m.isdir()}
        self._clear(root, "", keep, dirs)
        try:
            for name, member in names.items():
                if member.isdir():
                    _ensure_dir(root, name)
                    continue
                parent, _, leaf = name.rpartition("/")
                folder = _ensure_dir(root, parent) if parent else root
                source = tar.extractfile(member)
                assert source is not None
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                fd = os.open(folder / leaf, flags, 0o600)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
                    os.fchmod(out.fileno(), member.mode & 0o777)
            for name in sorted(dirs, key=lambda n: n.count("/"), reverse=True):
                os.chmod(root / name, names[name].mode & 0o777)
        except OSError as exc:
            raise ServiceError(f"files restore into {root} failed: {exc}") from None
        self._ignore_used[str(root.absolute())] = tuple(_clean_patterns(base))
        kept = tar.pax_headers.get(touched.TOUCHED_KEY)
        if kept is not None:
            try:
                paths = json.loads(kept)
                if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                    raise ValueError
            except ValueError:
                raise ServiceError("files capture has an unreadable list of kept files") from None
            touched.watch(str(root), paths)

    def _clear(self, folder: Path, prefix: str, keep: Sequence[str], dirs: set[str]) -> None:
        """Remove everything under ``folder`` but ignored entries; a directory the archive
        does not hold goes whole, ignored content included."""
        with os.scandir(folder) as it:
            children = list(it)
        for child in children:
            rel = f"{prefix}{child.name}"
            if is_ignored(rel, keep):
                continue
            path = Path(child.path)
            if child.is_dir(follow_symlinks=False):
                if rel in dirs:
                    os.chmod(path, 0o700)  # its captured mode is set after the extraction
                    self._clear(path, rel + "/", keep, dirs)
                else:
                    _make_writable(path)
                    shutil.rmtree(path)
            else:
                path.unlink()

    def state_hash(self, endpoint: str, *, ignore: Sequence[str] | None = None) -> str:
        root = self._existing_root(endpoint)
        token = touched.own()
        try:
            entries, _ = walk(root, self._effective(root, self._base_patterns(root, ignore)))
        finally:
            touched.release(token)
        return tree_hash(entries)

    def describe(
        self,
        endpoint: str,
        *,
        limit: int = DESCRIBE_LIMIT,
        ignore: Sequence[str] | None = None,
    ) -> dict[str, JsonValue]:
        """``{"files": {relative path: {"mode", "sha256", "size"}}}`` in path order (a
        directory as ``{"mode", "dir": true}``), the first ``limit`` entries; with more,
        ``"truncated": {"files": total}``."""
        root = self._existing_root(endpoint)
        entries, _ = walk(root, self._effective(root, self._base_patterns(root, ignore)))
        files: dict[str, JsonValue] = {}
        for entry in entries[:limit]:
            mode = f"{entry.mode:04o}"
            if entry.is_dir:
                files[entry.rel] = {"mode": mode, "dir": True}
            else:
                size = entry.path.stat(follow_symlinks=False).st_size
                files[entry.rel] = {"mode": mode, "sha256": entry.sha256, "size": size}
        out: dict[str, JsonValue] = {"files": files}
        if len(entries) > limit:
            out[TRUNCATED] = {"files": len(entries)}
        return out

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """Describe ``data`` extracted into a temporary folder (``endpoint`` is not
        touched)."""
        with tempfile.TemporaryDirectory(prefix="sbx-files-") as tmp:
            root = Path(tmp) / "expected"
            try:
                self.restore(str(root), data)
                return self.describe(str(root), limit=limit)
            finally:
                touched.unwatch(str(root))
                self._ignore_used.pop(str(root.absolute()), None)
                if root.exists():
                    _make_writable(root)

    def mark_restore_point(self, endpoint: str) -> None:
        self._points[str(self._root(endpoint).absolute())] = self.capture(endpoint).data
        found = touched.watch_of(endpoint)
        if found is not None:  # a restored touched capture: the run is watched from here
            found.start()

    def reset(self, endpoint: str) -> None:
        try:
            data = self._points[str(self._root(endpoint).absolute())]
        except KeyError:
            raise ServiceError(
                f"no restore point for workspace {endpoint}: call mark_restore_point first"
            ) from None
        self.restore(endpoint, data)
        found = touched.watch_of(endpoint)
        if found is not None:
            found.start()


def kept_paths(data: bytes) -> list[str] | None:
    """The paths a touched capture kept (its header), or ``None`` for a whole one."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            raw = tar.pax_headers.get(touched.TOUCHED_KEY)
    except (tarfile.TarError, EOFError) as exc:
        raise ServiceError(f"files capture is not a readable tar: {exc}") from None
    if raw is None:
        return None
    try:
        paths = json.loads(raw)
    except ValueError:
        paths = None
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ServiceError("files capture has an unreadable list of kept files")
    return paths


class PinnedWorkspace:
    """A run's first reads of a workspace as the kind's
    :class:`~sandbox.services.base.PinnedState`."""

    def __init__(
        self, kind: FilesKind, root: str, base: Sequence[str], ignored: Callable[[str], bool]
    ) -> None:
        from sandbox.seam import boundary

        self._kind = kind
        self._base = tuple(base)
        self.pin = touched.PinnedFiles(root, ignored, boundary.current())

    def bind(self) -> None:
        from sandbox.seam import boundary

        self.pin.bind(boundary.current())

    def unbind(self) -> None:
        """The run is over: its context's reads are no longer its own."""
        self.pin.unbind()

    def finish(self) -> tuple[CapturedState, CapturedState]:
        """The files read as at their first read, and the same paths as they are now."""
        try:
            meta = self.pin.meta()
            before = self._kind.touched_state(self._base, self.pin.first, self.pin.dirs, meta)
            ended = self.pin.now()
            after = self._kind.touched_state(self._base, ended, self.pin.dirs, meta)
        except OSError as exc:
            raise ServiceError(f"cannot read workspace {self.pin.root}: {exc}") from None
        finally:
            self.close()
        return before, after

    def close(self) -> None:
        self.pin.close()


KIND = register(FilesKind())
