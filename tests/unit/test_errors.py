"""The error types: one root, container errors under one base, every type in use, and no
builtin exception raised on purpose that escapes the library (a caller catches
:class:`~sandbox.errors.SandboxError` and gets one readable line)."""

from __future__ import annotations

import ast
import builtins
import inspect
from pathlib import Path

from sandbox import errors

ROOT = Path(__file__).resolve().parents[2]
CAUGHT_BY_CALLER = {
    ("sandbox/services/redis/dumptext.py", "lzf_decompress"),
    ("sandbox/capture/durable.py", "syncfs"),
    ("sandbox/services/postgres/pgarchive.py", "skip"),
}
"""Helpers whose error (``ValueError``, ``OSError``) the one caller in the same module turns
into its own answer."""
PROTOCOL = {("__getattr__", "AttributeError"), ("folder", "AttributeError")}
"""What Python's protocols ask a function to raise (a module's ``__getattr__``, the setter
of an attribute that cannot be set)."""


def _error_types() -> list[type[errors.SandboxError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.SandboxError) and cls.__module__ == errors.__name__
    ]


def _source_files() -> list[Path]:
    return [*(ROOT / "sandbox").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]


def test_container_errors_share_one_base() -> None:
    for cls in (
        errors.DockerUnavailableError,
        errors.ImageMissingError,
        errors.ImageBuildError,
        errors.ResourceError,
        errors.ServiceNotReadyError,
    ):
        assert issubclass(cls, errors.ContainerError), cls
    assert issubclass(errors.ServiceNotReadyError, errors.ServiceError)


def test_every_error_type_is_used() -> None:
    """Each type is raised, caught or built on outside ``sandbox/errors.py``."""
    text = "\n".join(p.read_text() for p in _source_files() if p != ROOT / "sandbox" / "errors.py")
    bases = {base for cls in _error_types() for base in cls.__bases__}
    unused = [
        cls.__name__ for cls in _error_types() if cls not in bases and cls.__name__ not in text
    ]
    assert unused == []


def _builtin_error(node: ast.expr | None) -> type[BaseException] | None:
    target = node.func if isinstance(node, ast.Call) else node
    found = getattr(builtins, target.id, None) if isinstance(target, ast.Name) else None
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def _handled(handler: ast.ExceptHandler) -> tuple[type[BaseException], ...]:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    out = []
    for name in names:
        if name is None:
            return (BaseException,)
        found = getattr(builtins, name.id, None) if isinstance(name, ast.Name) else None
        if isinstance(found, type) and issubclass(found, BaseException):
            out.append(found)
    return tuple(out)


class _Escapes(ast.NodeVisitor):
    """``raise ValueError(...)`` and the like that no enclosing ``try`` of the same function
    catches."""

    def __init__(self) -> None:
        self.caught: list[tuple[type[BaseException], ...]] = []
        self.function = ""
        self.found: list[tuple[str, int, str]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, saved = self.function, self.caught
        self.function, self.caught = node.name, []
        self.generic_visit(node)
        self.function, self.caught = outer, saved

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Try(self, node: ast.Try) -> None:
        self.caught.append(tuple(t for h in node.handlers for t in _handled(h)))
        for stmt in node.body:
            self.visit(stmt)
        self.caught.pop()
        for stmt in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(stmt)

    def visit_Raise(self, node: ast.Raise) -> None:
        raised = _builtin_error(node.exc)
        if raised is None or raised is NotImplementedError:
            return
        if not any(issubclass(raised, caught) for level in self.caught for caught in level):
            self.found.append((self.function, node.lineno, raised.__name__))


def test_no_builtin_error_escapes_the_library() -> None:
    escaping = []
    for path in _source_files():
        visitor = _Escapes()
        visitor.visit(ast.parse(path.read_text(), str(path)))
        name = path.relative_to(ROOT).as_posix()
        escaping.extend(
            f"{name}:{line} {function} raises {error}"
            for function, line, error in visitor.found
            if (name, function) not in CAUGHT_BY_CALLER and (function, error) not in PROTOCOL
        )
    assert escaping == []


def test_the_escape_check_sees_a_raise() -> None:
    """The check above finds a bare ``raise ValueError`` and passes one caught in place."""
    visitor = _Escapes()
    visitor.visit(
        ast.parse(
            "def f():\n    raise ValueError('x')\n"
            "def g():\n    try:\n        raise ValueError\n    except (KeyError, ValueError):\n"
            "        pass\n"
        )
    )
    assert visitor.found == [("f", 2, "ValueError")]
