"""A function's parameters read from its module's source, without running the module.

An entrypoint whose module raises as it is imported before the replay (it reads a variable
the replay sets) is imported again inside each run; what its parameters are is still
needed beforehand, to decide whether the recorded arguments are handed to it. Its ``def``
is found in the source by ``ast`` (the dotted path through classes), and its parameters
made an :class:`inspect.Signature` whose defaults are placeholders: it is for binding
arguments, not for calling."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

_P = inspect.Parameter
_DEFAULT = object()
"""Stands for a default value the source gives (only whether there is one matters)."""
_Def = ast.FunctionDef | ast.AsyncFunctionDef
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def signature_in_source(module_name: str, attr: str) -> inspect.Signature | None:
    """The parameters of ``module_name``'s ``attr`` (``function`` or ``Class.method``) as its
    source writes them; ``None`` when it cannot be told without running the module (no
    source, a parent package that raises, a name bound otherwise than by a ``def``)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception:  # a parent package raised as it was imported: nothing to look at
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    body: list[ast.stmt] = tree.body
    found: ast.stmt | None = None
    for part in attr.split("."):
        if found is not None:
            if not isinstance(found, ast.ClassDef):
                return None
            body = found.body
        found = _bound_last(body, part)
        if found is None:
            return None
    if not isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return _signature(found, in_class="." in attr)


def _bound_last(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The last top-level statement of ``body`` that binds ``name`` (the one in force once
    the body ran), when it is a ``def`` or a ``class``; ``None`` otherwise."""
    last: ast.stmt | None = None
    for stmt in body:
        if isinstance(stmt, _DEFS) and stmt.name == name:
            last = stmt
        elif name in _names_bound(stmt):
            last = None
    return last


def _names_bound(stmt: ast.stmt) -> set[str]:
    """The names a statement other than a ``def`` or ``class`` binds at its own level."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    elif not isinstance(stmt, (*_DEFS, ast.Expr, ast.Pass)):
        # an if, a try, a for ... may bind it any way (a def inside it too): read every
        # name it holds
        return {
            n.id if isinstance(n, ast.Name) else n.name
            for n in ast.walk(stmt)
            if isinstance(n, (ast.Name, *_DEFS))
        }
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _signature(function: _Def, *, in_class: bool) -> inspect.Signature:
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    params = [
        _P(
            arg.arg,
            _P.POSITIONAL_ONLY if i < len(a.posonlyargs) else _P.POSITIONAL_OR_KEYWORD,
            default=_DEFAULT if i >= first_default else _P.empty,
        )
        for i, arg in enumerate(positional)
    ]
    if a.vararg:
        params.append(_P(a.vararg.arg, _P.VAR_POSITIONAL))
    params += [
        _P(arg.arg, _P.KEYWORD_ONLY, default=_P.empty if d is None else _DEFAULT)
        for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    if a.kwarg:
        params.append(_P(a.kwarg.arg, _P.VAR_KEYWORD))
    if in_class and params and _decorated(function, "classmethod"):
        params = params[1:]  # the class, which the attribute passes
    return inspect.Signature(params)


def _decorated(function: _Def, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in function.decorator_list)
