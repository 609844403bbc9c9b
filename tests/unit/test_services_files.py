"""The files service kind: deterministic tar capture, safe restore, ignore patterns."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox.errors import ServiceError
from sandbox.services import get_kind
from sandbox.services.files import FORMAT, FORMAT_KEY, IGNORE_KEY, FilesKind


def _workspace(root: Path) -> str:
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    (root / "src" / "pkg" / "deep" / "data.bin").write_bytes(bytes(range(256)))
    (root / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    (root / "src" / "pkg" / "__pycache__").mkdir()
    (root / "src" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\x00pyc")
    (root / "tool.pyc").write_bytes(b"pyc")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "readonly.txt").write_text("keep\n")
    os.chmod(root / "readonly.txt", 0o444)
    (root / "empty").mkdir()
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return str(root)


def _names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getnames()


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf,
        mode="w",
        format=tarfile.PAX_FORMAT,
        pax_headers={FORMAT_KEY: FORMAT, IGNORE_KEY: '[".git", "__pycache__", "*.pyc"]'},
    ) as tar:
        for info, content in members:
            info.size = len(content) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(content) if info.isreg() else None)
    return buf.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def test_restore_gives_the_same_tree(tmp_path: Path) -> None:
    kind = get_kind("files")
    ws = _workspace(tmp_path / "ws")
    captured = kind.capture(ws)
    assert captured.meta["ignore"] == [".git", "__pycache__", "*.pyc"]
    names = _names(captured.data)
    assert "run.sh" in names and "empty" in names and "src/pkg/deep/data.bin" in names
    assert not any(".git" in n or "pycache" in n or n.endswith(".pyc") for n in names)

    target = tmp_path / "restored"
    kind.restore(str(target), captured.data)
    assert kind.state_hash(str(target)) == captured.state_hash == kind.state_hash(ws)
    assert stat.S_IMODE((target / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((target / "readonly.txt").stat().st_mode) == 0o444
    assert (target / "src" / "pkg" / "deep" / "data.bin").read_bytes() == bytes(range(256))
    assert (target / "empty").is_dir()


def test_restore_in_place_keeps_ignored_entries(tmp_path: Path) -> None:
    kind = get_kind("files")
    ws = _workspace(tmp_path / "ws")
    captured = kind.capture(ws)
    root = Path(ws)
    (root / "src" / "pkg" / "mod.py").write_text("X = 2\n")
    (root / "stray").mkdir()
    (root / "stray" / "__pycache__").mkdir()  # a new folder holding only ignored content
    (root / "link").symlink_to("/etc/passwd")
    os.chmod(root / "run.sh", 0o600)
    assert kind.state_hash(ws) != captured.state_hash
    kind.restore(ws, captured.data)
    assert kind.state_hash(ws) == captured.state_hash
    assert (root / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n", ".git survives"
    assert (root / "src" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").exists()
    assert not (root / "stray").exists() and not (root / "link").is_symlink()


def test_capture_is_deterministic(tmp_path: Path) -> None:
    kind = get_kind("files")
    ws = _workspace(tmp_path / "ws")
    first = kind.capture(ws)
    os.utime(Path(ws) / "run.sh", (1, 1))
    assert kind.capture(ws).data == first.data
    other = _workspace(tmp_path / "other")  # same content created later, elsewhere
    assert kind.capture(other).data == first.data


def test_hash_covers_path_mode_and_content(tmp_path: Path) -> None:
    kind = get_kind("files")
    ws = _workspace(tmp_path / "ws")
    original = kind.state_hash(ws)
    os.chmod(Path(ws) / "run.sh", 0o644)
    assert kind.state_hash(ws) != original
    os.chmod(Path(ws) / "run.sh", 0o755)
    assert kind.state_hash(ws) == original
    (Path(ws) / "empty").rename(Path(ws) / "empty2")
    assert kind.state_hash(ws) != original


def test_ignore_patterns_are_configurable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    (Path(ws) / "node_modules" / "x").mkdir(parents=True)
    (Path(ws) / "build").mkdir()
    (Path(ws) / "build" / "out.o").write_bytes(b"o")
    kind = FilesKind(ignore=[".git", "node_modules"])
    captured = kind.capture(ws)
    names = _names(captured.data)
    assert "tool.pyc" in names and not any(n.startswith("node_modules") for n in names)
    (Path(ws) / ".sandboxignore").write_text("# generated\nbuild/out.o\n")
    names = _names(kind.capture(ws).data)
    assert "build" in names and "build/out.o" not in names and ".sandboxignore" in names
    custom = get_kind("files").capture(ws, ignore=["*.txt"])  # type: ignore[call-arg]
    assert custom.meta["ignore"] == ["*.txt"]
    assert ".git/HEAD" in _names(custom.data)


def test_special_files_are_skipped_and_listed(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    (Path(ws) / "escape").symlink_to("/etc")
    os.mkfifo(Path(ws) / "pipe")
    captured = get_kind("files").capture(ws)
    assert captured.meta["skipped"] == ["escape", "pipe"]
    assert "escape" not in _names(captured.data)


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_member("/etc/evil"), "unsafe member path"),
        (_member("../evil"), "unsafe member path"),
        (_member("a/../../evil"), "unsafe member path"),
        (_member("a//b"), "unsafe member path"),
        (_member("link", tarfile.SYMTYPE, linkname="/etc/passwd"), "not a regular file"),
        (_member("hard", tarfile.LNKTYPE, linkname="run.sh"), "not a regular file"),
        (_member("dev", tarfile.CHRTYPE), "not a regular file"),
        (_member(".git/hooks/pre-commit"), "ignored path"),
    ],
)
def test_unsafe_archives_are_refused_before_any_change(
    tmp_path: Path, member: tarfile.TarInfo, reason: str
) -> None:
    ws = _workspace(tmp_path / "box" / "ws")
    kind = get_kind("files")
    before = kind.state_hash(ws)
    above = _tree(tmp_path)  # the workspace, its parent and the folder above that
    data = _tar((_member("ok.txt"), b"fine"), (member, b"evil"))
    with pytest.raises(ServiceError, match=reason):
        kind.restore(ws, data)
    assert kind.state_hash(ws) == before
    assert _tree(tmp_path) == above, "nothing was written above (or in) the workspace"
    assert not Path("/etc/evil").exists()


def _tree(root: Path) -> dict[str, tuple[int, int, bytes | str | None]]:
    """Every entry under ``root``: its mode, size and content (a link's target)."""
    found: dict[str, tuple[int, int, bytes | str | None]] = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if path.is_symlink():
            content: bytes | str | None = os.readlink(path)
        elif path.is_file():
            content = path.read_bytes()
        else:
            content = None
        found[str(path.relative_to(root))] = (st.st_mode, st.st_size, content)
    return found


def test_other_bad_archives(tmp_path: Path) -> None:
    kind = get_kind("files")
    with pytest.raises(ServiceError, match="not a readable tar"):
        kind.restore(str(tmp_path / "ws"), b"not a tar at all" * 40)
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        tar.addfile(_member("x"), io.BytesIO(b""))
    with pytest.raises(ServiceError, match="not a files capture"):
        kind.restore(str(tmp_path / "ws"), plain.getvalue())
    twice = _tar((_member("a"), b"1"), (_member("a"), b"2"))
    with pytest.raises(ServiceError, match="appears twice"):
        kind.restore(str(tmp_path / "ws"), twice)
    with pytest.raises(ServiceError, match="does not exist"):
        kind.capture(str(tmp_path / "nowhere"))
    with pytest.raises(ServiceError, match="mark_restore_point"):
        kind.reset(str(tmp_path / "nowhere"))


_part = st.sampled_from(["a", "b", "..", ".", "", "/", "x\\y", ".git", "c.txt"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(st.lists(_part, min_size=1, max_size=4).map("/".join), max_size=4))
def test_restore_never_writes_outside_the_folder(tmp_path: Path, names: list[str]) -> None:
    base = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    root = base / "ws"
    root.mkdir(parents=True)
    members = [(_member(n), b"x") for n in names if n]
    try:
        data = _tar(*members)
    except (ValueError, tarfile.TarError):
        return
    with contextlib.suppress(ServiceError):
        get_kind("files").restore(str(root), data)
    outside = [p for p in base.rglob("*") if root not in p.parents and p != root]
    assert outside == []
    for path in root.rglob("*"):
        assert path.is_dir() or path.is_file()
        assert not path.is_symlink()
