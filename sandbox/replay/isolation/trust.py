"""What an imported run may run on this host.

A run brought in by ``sandbox import`` carries its :class:`~sandbox.snapshot.manifest.Provenance`:
it is someone else's data. Replaying it runs its entrypoint, so an imported run whose
entrypoint is a command, or a ``module:function`` that resolves outside the current project
(or into installed packages), is refused on the host unless the user trusts it (``--trust``)
or the replay runs in the runner container. The module check imports nothing: the module is
looked up by the path finder, the way the replay would import it. Once that module (the
project's own code) is imported, the callable must be a function defined there under the
recorded name (its ``__module__`` a project module, its ``__qualname__`` the attribute path):
``examples.orders:os.getppid`` reaches a function of another module through an attribute of a
project module, and is refused as well. A web app that captures its requests (ASGI or
WSGI), at the top level of a project module (``chat:app``, what the middlewares record when
given no entrypoint), may be sent the run's request, as may the app a function of the
project makes (``shop:create_app()``: the function checked as any other).
"""

from __future__ import annotations

import inspect
import shlex
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any, TypeVar

from sandbox.capture.served import MADE, MadeApp, captures
from sandbox.errors import UntrustedRunError
from sandbox.snapshot.manifest import Entrypoint, Manifest

_INSTALLED = frozenset({"site-packages", "dist-packages"})
F = TypeVar("F", bound=Callable[..., Any])


def module_origin(target: str, project: Path) -> Path | None:
    """Where the top-level module of ``module:function`` would be imported from (the
    replay's order: already imported, ``sys.path``, then the project folder); ``None`` when
    it is built in or not found."""
    top = target.partition(":")[0].split(".")[0]
    if not top:
        return None
    loaded = sys.modules.get(top)
    where = getattr(loaded, "__file__", None) if loaded is not None else None
    if where is None:
        spec = PathFinder.find_spec(top) or PathFinder.find_spec(top, [str(project)])
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
        where = spec.origin if spec.has_location and spec.origin else None
        if where is None and locations:
            where = locations[0]
    return Path(where).resolve() if where else None


def _inside_project(origin: Path | None, project: Path) -> bool:
    if origin is None:
        return False
    root = project.resolve()
    if not origin.is_relative_to(root):
        return False
    return not _INSTALLED.intersection(origin.relative_to(root).parts)


def what_would_run(manifest: Manifest, project: Path) -> str | None:
    """For an imported run whose entrypoint is not plainly the project's own code, what the
    replay would run (for the refusal); ``None`` when it may run here."""
    if manifest.provenance is None or manifest.entrypoint is None:
        return None
    entry = manifest.entrypoint
    if entry.kind == "command":
        return f"the command {shlex.join(entry.command)}" if entry.command else None
    target = entry.target or ""
    if entry.args or entry.kwargs:  # data the bundle chose, handed to the project's code
        return f"{target} called with the arguments the bundle recorded"
    origin = module_origin(target, project)
    if _inside_project(origin, project):
        return None
    found = f"from {origin}" if origin is not None else "not found in this project"
    return f"{target} ({found}, outside {project.resolve()})"


def defined_in_project(function: object, target: str, project: Path) -> str | None:
    """``None`` when ``function`` is a function defined in a module of ``project`` under the
    name ``target`` gives it (``module:Qual.name``); otherwise what it is instead."""
    attr = target.partition(":")[2]
    if isinstance(function, MadeApp):  # the project's function that makes the app
        return defined_in_project(function.factory, target.removesuffix(MADE), project)
    if captures(function):  # an app that captured the run's request, at a module's top
        if "." in attr or not _inside_project(module_origin(target, project), project):
            return f"{target} (an app reached through another name, or outside the project)"
        return None
    inner = inspect.unwrap(function) if callable(function) else function
    if not (inspect.isfunction(inner) or inspect.isfunction(function)):
        return f"{target} ({type(function).__name__}, not a function of the project)"
    defined = getattr(function, "__module__", None) or ""
    qualname = getattr(function, "__qualname__", None)
    if qualname != attr:
        return f"{target} ({defined}.{qualname}, reached through another name)"
    origin = module_origin(defined, project) if defined else None
    module = sys.modules.get(defined)
    where = getattr(module, "__file__", None) if module is not None else None
    if where is not None:
        origin = Path(where).resolve()
    if not _inside_project(origin, project):
        return f"{target} (defined in {defined or 'no module'}, outside {project.resolve()})"
    return None


def check_callable(
    manifest: Manifest,
    function: F,
    called: Entrypoint,
    *,
    trust: bool,
    override: str | None = None,
    project: Path | None = None,
) -> F:
    """``function`` (the resolved entrypoint of ``manifest``, to be called as ``called``
    says) when it may run; raise :class:`UntrustedRunError` otherwise (nothing was called).
    For an imported run, untrusted: no recorded argument reaches it (they are the bundle's
    data, and would choose what even a function the user named does: a path to delete, a
    command), and a callable the user did not name must be a function defined in the
    project under its recorded name."""
    if trust or manifest.provenance is None or manifest.entrypoint is None:
        return function
    if called.args or called.kwargs:
        raise _refusal(manifest, f"{called.target} called with the arguments the bundle recorded")
    if override:
        return function
    what = defined_in_project(function, manifest.entrypoint.target or "", project or Path.cwd())
    if what is not None:
        raise _refusal(manifest, what)
    return function


def _refusal(manifest: Manifest, what: str) -> UntrustedRunError:
    assert manifest.provenance is not None
    return UntrustedRunError(
        f"run {manifest.run_id} was imported from {manifest.provenance.imported_from} "
        f"(untrusted): replaying it would run {what} on this host; nothing ran. "
        "Replay it with --trust if you trust the bundle, or in the runner container "
        f"(sandbox ci-repro --in-container --run {manifest.run_id})"
    )


def check_trusted(
    manifest: Manifest,
    *,
    trust: bool,
    override: str | None = None,
    project: Path | None = None,
) -> None:
    """Raise :class:`UntrustedRunError` when replaying ``manifest`` on the host would run an
    imported run's code that the user did not trust. An ``override`` entrypoint is the
    user's own choice and always runs."""
    if trust or override:
        return
    what = what_would_run(manifest, project or Path.cwd())
    if what is not None:
        raise _refusal(manifest, what)
