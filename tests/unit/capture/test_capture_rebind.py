"""Names a module bound to a function before a patch replaced it are pointed at the patched
one while the patch holds, and back after; a module loaded after one patch is looked through
when the next applies."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from sandbox.capture.rebind import Rebinder


def original() -> str:
    return "original"


def patched() -> str:
    return "patched"


@pytest.fixture
def modules() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        sys.modules.pop(name, None)


def _module(name: str, modules: list[str], **names: object) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(names)
    sys.modules[name] = module
    modules.append(name)
    return module


def test_a_name_bound_before_the_patch_is_rebound_then_pointed_back(modules: list[str]) -> None:
    early = _module("rebind_early", modules, draw=original, keep=len)
    rebinder = Rebinder()

    undo = rebinder.rebind({original: patched})
    assert early.draw is patched and early.keep is len
    undo()
    assert early.draw is original


def test_a_module_loaded_after_a_patch_is_looked_through_at_the_next(
    modules: list[str],
) -> None:
    rebinder = Rebinder()
    rebinder.rebind({original: patched})()
    late = _module("rebind_late", modules, draw=original)

    undo = rebinder.rebind({original: patched})
    assert late.draw is patched
    undo()
    assert late.draw is original
