"""A module written for a test and importable by its name, shared by the replay tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def written_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str, source: str
) -> Iterator[str]:
    """For a fixture to ``yield from``: ``source`` as a module of a name of its own on
    ``sys.path``, forgotten (by ``sys.modules`` too) after the test."""
    name = f"{prefix}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
