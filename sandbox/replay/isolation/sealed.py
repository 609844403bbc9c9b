"""The replayed agent's module imported before its runs, with nothing outside this process
reached: what the module does as it is imported (a connection, a statement, a request)
would otherwise reach the recorded services themselves, the sandbox not being up yet.

:func:`sealed_import` holds the network guard (:mod:`sandbox.replay.isolation.netguard`,
nothing allowed but what a policy serves live) and the clients' router with no sandbox
counterpart (:mod:`sandbox.replay.isolation.redirect`: every database or Redis connection
refused) around the import. When the import met a refusal, the modules it left imported
that belong to the project (not the standard library's or an installed package's: one of
them may have caught the refusal and carried on without its connection) are dropped, and
the caller imports the module again inside each run, where the sandbox is up and the
same guard and router send its connections there
(:func:`~sandbox.replay.engine.resolve_entrypoint`).
"""

from __future__ import annotations

import contextlib
import functools
import site
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from sandbox.errors import NetworkRefusedError
from sandbox.replay.isolation.netguard import NetGuard
from sandbox.replay.isolation.redirect import Redirect
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.manifest import Manifest


@contextlib.contextmanager
def sealed_import(original: Manifest, policies: PolicySet) -> Iterator[list[NetworkRefusedError]]:
    """Around an import before the replay's runs: see the module documentation. Yields the
    refusals it meets, in order."""
    refused: list[NetworkRefusedError] = []
    before = set(sys.modules)
    undo_clients = Redirect(original, {}, policies=policies, refuse=refused.append).install()
    try:
        undo_guard = NetGuard((), policies=policies, on_refusal=refused.append).install()
        try:
            yield refused
        finally:
            undo_guard()
    finally:
        undo_clients()
        if refused:
            forget_project_modules(set(sys.modules) - before)


def forget_project_modules(names: set[str]) -> None:
    """Forget the project's modules among ``names``, so that they are imported again (not
    this package's own, nor those of the standard library or of installed packages)."""
    installed = _installed()
    for name in names:
        origin = getattr(sys.modules.get(name), "__file__", None)
        if origin is not None and not any(
            Path(origin).resolve().is_relative_to(root) for root in installed
        ):
            del sys.modules[name]


@functools.cache
def _installed() -> tuple[Path, ...]:
    """Where the standard library, installed packages and this package live."""
    paths = sysconfig.get_paths()
    found = [
        *(paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")),
        *site.getsitepackages(),
        site.getusersitepackages(),
        Path(__file__).parents[2],  # sandbox itself
    ]
    return tuple(dict.fromkeys(Path(path).resolve() for path in found if path))
