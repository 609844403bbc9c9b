"""Where an object lives: the ``module:name`` a replay imports to find it again (an app a
middleware captures: :func:`app_entrypoint`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox.snapshot.manifest import Entrypoint


def import_path(obj: object, via: str | None = None) -> str | None:
    """``module:name`` of a top-level name of an imported module bound to ``obj``, or with
    ``via`` to an object whose own attribute ``via`` is ``obj`` (the module first in name
    order when several hold it: any of them gives it back), else ``None``. A script's
    (``__main__``) is named by the module it was run as (``python -m chat``) or, for a file
    in the working directory, by the file's stem."""
    found: list[str] = []
    for name, module in list(sys.modules.items()):
        attr = _holding(module, obj, via)
        if attr is None:
            continue
        if name == "__main__":
            main = _main_name(module)
            if main is not None:
                found.append(f"{main}:{attr}")
        else:
            found.append(f"{name}:{attr}")
    return min(found, default=None)


def own_attributes(obj: object) -> dict[str, Any]:
    """``obj``'s own attributes (its ``__dict__``), read without running any code of its
    class (a ``__getattr__`` that imports, or raises anything, as pytest's ``mark`` does);
    none when it has no dict of its own."""
    try:
        found = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return found if isinstance(found, dict) else {}


def _holding(module: ModuleType | None, obj: object, via: str | None) -> str | None:
    for key, value in list(own_attributes(module).items()):
        if not (isinstance(key, str) and key.isidentifier()):
            continue
        if value is obj or (via is not None and own_attributes(value).get(via) is obj):
            return key
    return None


def _main_name(main: ModuleType) -> str | None:
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)
    where = getattr(main, "__file__", None)
    if where and Path(where).resolve().parent == Path(os.getcwd()).resolve():
        return Path(where).stem
    return None


def app_entrypoint(
    app: object, middleware: str, replay: str, via: str | None = None
) -> Entrypoint | None:
    """The entrypoint of the runs of a web ``app`` whose ``middleware`` was given none: the
    app, where a module holds it (:func:`import_path`; its replay sends the recorded request
    through it). None found, said on stderr (call it once): the runs' replay would run the
    server's command again. Fails open."""
    try:
        where = import_path(app, via)
    except Exception:
        where = None
    if where is None:
        sys.stderr.write(
            f"sandbox: {middleware} cannot find its app at a module's top level: give it "
            "entrypoint=Entrypoint(kind='callable', target='module:replay') with "
            f"def replay(): return {replay}(app), or its requests cannot be replayed\n"
        )
        return None
    return Entrypoint(kind="callable", target=where, cwd=os.getcwd())
