"""Where an object lives: the ``module:name`` a replay imports to find it again (an app a
middleware captures: :func:`app_entrypoint`), or the ``module:factory()`` that makes it
(:class:`AppFactory`)."""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
from pathlib import Path
from types import FrameType, ModuleType
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


_INSTALLED = tuple(
    {str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "purelib", "platlib")}
)


class AppFactory:
    """The call that is making an app, as its middleware is made (:meth:`of_caller`): a
    function of the project's own code that returns the app, or a uvicorn server's
    ``--factory``. :meth:`target` names it once the app is served."""

    def __init__(self, target: str, frame: FrameType | None = None) -> None:
        self._target = target
        self._frame = frame
        """The function's call: still running when the app is served, it was no factory."""

    @classmethod
    def of_caller(cls) -> AppFactory | None:
        """Walking out from the caller, the first of: a uvicorn server started with a
        factory (``uvicorn --factory chat:create_app``, ``uvicorn.run(..., factory=True)``);
        a frame of the project's code (not installed, not this package's), which names the
        factory when it is a function at its module's top level called with no argument
        it requires (Flask's ``create_app``), and nothing otherwise. Fails open."""
        try:
            frame = sys._getframe(1)
            while frame is not None:
                served = _uvicorn_factory(frame)
                if served is not None:
                    return cls(served)
                called = _project_function(frame)
                if called is not None:
                    return cls(called, frame) if called else None
                frame = frame.f_back  # type: ignore[assignment]
        except Exception:
            return None
        return None

    def target(self) -> str | None:
        """``module:factory()`` once the app is served: none when the function is still
        running (a ``main`` that makes the app and serves it)."""
        frame, self._frame = self._frame, None
        if frame is not None and any(
            _on_stack(frame, top) for top in sys._current_frames().values()
        ):
            return None
        return f"{self._target}()"


def _on_stack(frame: FrameType, top: FrameType | None) -> bool:
    while top is not None:
        if top is frame:
            return True
        top = top.f_back
    return False


def _uvicorn_factory(frame: FrameType) -> str | None:
    """The factory a uvicorn server's config names, for a call of a method of that config
    or of an object holding it (its lifespan's, where Starlette makes its middleware).
    Only uvicorn's own frames have their locals read."""
    if not str(frame.f_globals.get("__name__", "")).startswith("uvicorn."):
        return None
    holder = frame.f_locals.get("self")
    config = own_attributes(holder).get("config", holder)
    if type(config).__module__ != "uvicorn.config":
        return None
    found = own_attributes(config)
    app = found.get("app")
    return app if found.get("factory") is True and isinstance(app, str) and ":" in app else None


def _project_function(frame: FrameType) -> str | None:
    """For a frame of the project's code: ``module:name`` when it is a call of a function
    at its module's top level that requires no argument, else ``""`` (a method, a nested
    function, a module's own code, a function given arguments it requires: nothing a
    replay could call again alone); ``None`` for a frame of other code."""
    module = frame.f_globals.get("__name__")
    where = frame.f_code.co_filename
    if not isinstance(module, str) or module == "sandbox" or module.startswith("sandbox."):
        return None
    if not where or where.startswith("<") or str(Path(where).resolve()).startswith(_INSTALLED):
        return None
    function = frame.f_globals.get(frame.f_code.co_name)
    if not callable(function) or getattr(inspect.unwrap(function), "__code__", None) is not (
        frame.f_code
    ):
        return ""
    if any(
        p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in inspect.signature(function).parameters.values()
    ):
        return ""
    if module == "__main__":
        main = sys.modules.get("__main__")
        module = (_main_name(main) if main is not None else None) or ""
    return f"{module}:{frame.f_code.co_name}" if module else ""


def app_entrypoint(
    app: object,
    middleware: str,
    factory: AppFactory | None = None,
    via: str | None = None,
) -> Entrypoint | None:
    """The entrypoint of the runs of a web ``app`` whose ``middleware`` was given none: the
    app, where a module holds it (:func:`import_path`), else the ``factory`` that made it
    (each replay makes the app again); a replay sends the recorded request through it.
    None found, said on stderr (call it once): the runs' replay would run the server's
    command again. Fails open."""
    try:
        where = import_path(app, via) or (factory.target() if factory is not None else None)
    except Exception:
        where = None
    if where is None:
        sys.stderr.write(
            f"sandbox: {middleware} cannot find its app at a module's top level nor the "
            "function that made it: give it entrypoint=Entrypoint(kind='callable', "
            "target='module:create_app()') naming a function that returns the app, or its "
            "requests cannot be replayed\n"
        )
        return None
    return Entrypoint(kind="callable", target=where, cwd=os.getcwd())
