"""Touched-state capture for a files workspace: only the files a run opened for reading,
each with its content (by hash) at the run's first read, instead of the whole folder.

Opens are seen through the interpreter's audit hook (``open`` events: ``open()``,
``io.open``, ``pathlib``, ``os.open``), installed once per process and doing nothing while
no pin or watch is held. At capture (the kind's :meth:`~sandbox.services.files.FilesKind.pin`)
an open by the run in context (:func:`sandbox.seam.boundary.current`) of a path under the
workspace, for reading (``r``, ``r+``, ``a``: what was there before counts), is a first read
the first time: the file's mode and content are read before the open goes on (a file that
did not exist is kept as absent). A kept run holds those files (a tar of the kind's format,
its list of kept paths in a header) and, as its end state, the same paths as the run left
them; a run not kept cost one read of each file it read.

On replay the kind restores exactly those files and watches the workspace from the restore
point on (:class:`Watch`): an open of any other path under it, by the process running the
replay, makes the replay inconclusive with that path (the kind's ``outside_capture``). A
replay in another process (a command's child) is not watched.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import stat
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sandbox.seam import boundary

STATE_META = "state"
FILES_META = "files_of"
"""Key of the meta listing the kept paths (relative), at most :data:`LISTED`."""
COUNT_META = "touched_files"
LISTED = 1000
TOUCHED_KEY = "sandbox-replayer.touched"
"""Tar header of a touched capture: the JSON list of the kept paths (present or absent)."""

_inside = contextvars.ContextVar("sandbox_files_touch_inside", default=False)
_lock = threading.Lock()
_pins: dict[tuple[int, str], PinnedFiles] = {}
_watches: dict[str, Watch] = {}
_installed = False


def _reads(mode: object, flags: object) -> bool:
    """Whether an open with this mode (``open()``) or these flags (``os.open``) reads what
    was there before."""
    if isinstance(mode, str):
        return "r" in mode or "a" in mode or ("+" in mode and "w" not in mode)
    if isinstance(flags, int):
        access = flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
        return access != os.O_WRONLY or bool(flags & os.O_APPEND)
    return True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or (not _pins and not _watches) or _inside.get():
        return
    try:
        path, mode, flags = (*tuple(args), None, None, None)[:3]
        if isinstance(path, int) or path is None or not _reads(mode, flags):
            return
        real = os.path.realpath(os.fsdecode(os.fspath(path)))
        token = _inside.set(True)
        try:
            for watch in list(_watches.values()):
                watch.opened(real)
            run = boundary.current() if _pins else None
            if run is not None:
                for (owner, _root), pin in list(_pins.items()):
                    if owner == id(run):
                        pin.opened(real)
        finally:
            _inside.reset(token)
    except Exception:  # capture fails open: the agent's open goes on
        return


def _install() -> None:
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def _relative(root: str, real: str) -> str | None:
    if real == root or not real.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return os.path.relpath(real, root).replace(os.sep, "/")


class PinnedFiles:
    """One run's first reads of one workspace (see the module documentation)."""

    def __init__(self, root: str, ignored: Callable[[str], bool], owner: object | None) -> None:
        self.root = os.path.realpath(root)
        self._ignored = ignored
        self._owner = owner
        self.first: dict[str, tuple[int, bytes] | None] = {}
        """Relative path -> its mode and content at first read (``None``: absent)."""
        self.unread: dict[str, str] = {}
        self.dirs: dict[str, int] = {}
        """The folders holding the files read, and their modes."""
        self._lock = threading.Lock()
        _install()
        self._register()

    def _register(self) -> None:
        with _lock:
            _pins[(id(self._owner), self.root)] = self

    def _unregister(self) -> None:
        with _lock:
            key = (id(self._owner), self.root)
            if _pins.get(key) is self:
                del _pins[key]

    def bind(self, owner: object | None) -> None:
        self._unregister()
        self._owner = owner
        self._register()

    def unbind(self) -> None:
        """Take no more reads (the run is over)."""
        self._unregister()

    def opened(self, real: str) -> None:
        rel = _relative(self.root, real)
        if rel is None or self._ignored(rel):
            return
        with self._lock:
            if rel in self.first or rel in self.unread:
                return
            try:
                self.first[rel] = read(real)
                parent = rel.rpartition("/")[0]
                while parent and parent not in self.dirs:
                    st = os.stat(os.path.join(self.root, parent))
                    self.dirs[parent] = stat.S_IMODE(st.st_mode) & 0o777
                    parent = parent.rpartition("/")[0]
            except OSError as exc:
                self.first.pop(rel, None)
                self.unread[rel] = str(exc)

    def now(self) -> dict[str, tuple[int, bytes] | None]:
        """The kept paths as they are now."""
        token = _inside.set(True)
        try:
            return {rel: read(os.path.join(self.root, rel)) for rel in self.first}
        finally:
            _inside.reset(token)

    def meta(self) -> dict[str, Any]:
        paths = sorted(self.first)
        out: dict[str, Any] = {
            STATE_META: "touched",
            COUNT_META: len(paths),
            FILES_META: paths[:LISTED],
        }
        if self.unread:
            out["unread"] = sorted(self.unread)[:LISTED]
        return out

    def close(self) -> None:
        self._unregister()


def read(path: str) -> tuple[int, bytes] | None:
    """A regular file's mode and content, or ``None`` when there is none (absent, a folder,
    a special file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    with open(path, "rb") as f:
        return stat.S_IMODE(st.st_mode) & 0o777, f.read()


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


class Watch:
    """A restored touched workspace watched in this process: the paths opened under it that
    were not kept, in order."""

    def __init__(self, root: str, kept: Sequence[str]) -> None:
        self.root = os.path.realpath(root)
        self.kept = frozenset(kept)
        self.active = False
        self.outside: list[str] = []
        self.seen = False
        """Whether anything under the workspace was opened (by this process) since."""

    def start(self) -> None:
        self.outside.clear()
        self.seen = False
        self.active = True

    def opened(self, real: str) -> None:
        if not self.active:
            return
        rel = _relative(self.root, real)
        if rel is None:
            return
        self.seen = True
        if rel not in self.kept and rel not in self.outside:
            self.outside.append(rel)

    def stop(self) -> list[str]:
        """Stop watching; what the run reached that was not kept, described. A run that
        opened nothing under the workspace, where the capture kept files, was not watched
        (it ran in another process): that is said too, since a read that was not kept
        could not be seen."""
        self.active = False
        out = [f"read file {rel!r}, which the capture did not keep" for rel in self.outside]
        if not self.seen and self.kept:
            out.append(
                f"opened none of the {len(self.kept)} file(s) the capture kept in this "
                "process: its reads of the workspace could not be watched (another process?)"
            )
        return out


def watch(root: str, kept: Sequence[str]) -> Watch:
    """Watch ``root`` (restored from a touched capture keeping ``kept``)."""
    _install()
    found = Watch(root, kept)
    with _lock:
        _watches[found.root] = found
    return found


def watch_of(root: str) -> Watch | None:
    return _watches.get(os.path.realpath(root))


def unwatch(root: str) -> None:
    with _lock:
        _watches.pop(os.path.realpath(root), None)


def own() -> contextvars.Token[bool]:
    """Mark the kind's own reads in this context as not the run's (reset with the token)."""
    return _inside.set(True)


def release(token: contextvars.Token[bool]) -> None:
    _inside.reset(token)


def describe_meta(meta: Mapping[str, Any]) -> str | None:
    if meta.get(STATE_META) != "touched" or COUNT_META not in meta:
        return None
    paths = [str(p) for p in meta.get(FILES_META) or []]
    listed = ", ".join(paths[:8]) + (", ..." if len(paths) > 8 else "")
    return f"partial: {meta[COUNT_META]} files the run read ({listed})"
