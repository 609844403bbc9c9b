"""Patches that wait for their library (:class:`sandbox.capture.imports.ImportPatch`)."""

from __future__ import annotations

import importlib.metadata

import pytest

from sandbox.capture.imports import ImportPatch, Undo
from sandbox.capture.shared import Shared


def test_a_patch_that_cannot_apply_names_the_package_and_version_and_breaks_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A library version an integration does not know (its module moved, say) is one line
    on stderr naming the package and its version, never an error in the program importing
    it (capture fails open)."""

    def apply() -> Undo:
        from wrapt import no_such_module  # type: ignore[attr-defined]  # noqa: F401

        raise AssertionError("unreachable")

    patch = ImportPatch("wrapt.importer", apply)
    stop = patch.start()  # wrapt is imported already: the patch applies now
    try:
        importlib.import_module("wrapt.importer")
        assert not patch.applied
    finally:
        stop()
    version = importlib.metadata.version("wrapt")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"sandbox: wrapt {version} is not supported: ")
    assert "no_such_module" in line


@pytest.mark.parametrize("kind", ["shared", "import"])
def test_a_counted_patch_is_undone_by_its_last_holder_and_a_release_counts_once(
    kind: str,
) -> None:
    """Two holders: the first releasing twice leaves the patch on (its second call counts
    for nothing); the second releasing undoes it, once."""
    undone: list[str] = []

    def install() -> Undo:
        return lambda: undone.append("undo")

    if kind == "shared":
        shared = Shared(install)
        first, second = shared.acquire(), shared.acquire()
    else:
        patch = ImportPatch("json", install)  # imported already: applies at the first start
        first, second = patch.start(), patch.start()
    first()
    first()
    assert undone == []
    second()
    second()
    assert undone == ["undo"]
