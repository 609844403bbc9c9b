"""Service kinds come through the ``sandbox_replayer.services`` entry-point group: an
installed distribution adds one, a broken one is named in the error, and the built-in
fallback list is the project's own entry points."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import plugins
from sandbox.errors import ServiceError
from sandbox.services import base, registry

ROOT = Path(__file__).resolve().parents[2]

KIND_MODULE = """
from typing import ClassVar
from sandbox.services.descriptor import KindBinding

class NoteKind:
    name: ClassVar[str] = "note"
    binding: ClassVar[KindBinding] = KindBinding(path="file")
    container = None

KIND = NoteKind()
"""


def _distribution(root: Path, entry_points: str) -> None:
    """A distribution ``note-kind`` installed at ``root`` (a ``.dist-info`` beside its code)."""
    (root / "note_kind.py").write_text(KIND_MODULE)
    info = root / "note_kind-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: note-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{plugins.SERVICES_GROUP}]\n{entry_points}\n")


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry loads its entry points again, and forgets what the test registered."""
    before = dict(base.registered())
    monkeypatch.setattr(registry, "_loaded", False)
    yield
    for name in set(base.registered()) - set(before):
        base.unregister(name)
    sys.modules.pop("note_kind", None)


def test_an_installed_distribution_adds_a_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    _distribution(tmp_path, "note = note_kind:KIND")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "note" in registry.kind_names()
    assert registry.get_kind("note").binding.path == "file"
    assert {"files", "postgres", "redis", "sqlite"} <= set(registry.kind_names())


def test_a_broken_entry_point_is_named_in_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    _distribution(tmp_path, "note = note_kind:NO_SUCH_NAME")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ServiceError, match=r"service kind 'note' \(note_kind:NO_SUCH_NAME\)"):
        registry.get_kind("postgres")


def test_an_entry_point_named_otherwise_than_its_kind_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    _distribution(tmp_path, "memo = note_kind:KIND")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ServiceError, match="not a service kind named 'memo'"):
        registry.kind_names()


def test_the_built_in_list_is_the_projects_own_entry_points() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for group in (plugins.SERVICES_GROUP, plugins.CLIENTS_GROUP):
        assert plugins.BUILTIN[group] == project.get(group, {}), group
