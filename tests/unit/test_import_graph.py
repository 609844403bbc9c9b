"""The import graph of ``sandbox/``, read from the source (every import statement, including
those inside functions): every module belongs to one layer of :data:`LAYERS` and imports
none above its own, the package never imports ``cli``; in particular the lower layers never
import ``sandbox.replay``, the seam (``sandbox.seam``, the contract capture and replay share)
stands below both, the seam, the snapshot store and the services never import the capture
(redaction, which they share, is ``sandbox.redaction``, below them all), and no module
imports itself back through any chain.

The one allowed upward edge is the boot hook ``sandbox/capture/_site/sitecustomize.py``: it is
put on ``PYTHONPATH`` of a wrapped command and starts either the capture or, for the replay of
such a run, the replay child (``sandbox.replay.command``), or a process the replay runs live
under its frozen clock (``sandbox.replay.isolation.liveprocess``); it is code run in another
process, not a dependency of the capture package.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox"
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "sandbox.redaction",
        "sandbox.errors",
        "sandbox.names",
        "sandbox.sizes",
        "sandbox.processes",
        "sandbox.plugins",
    ),
    ("sandbox.snapshot",),
    ("sandbox.seam",),
    ("sandbox.services",),
    ("sandbox.containers",),
    ("sandbox.capture",),
    ("sandbox.replay",),
    (
        "sandbox.report",
        "sandbox.regress",
        "sandbox.explain",
        "sandbox.otel",
        "sandbox.sweep",
        "sandbox.k8s",
        "sandbox.doctor",
        "sandbox.pytest_plugin",
        "sandbox",
    ),
)
"""Every module of the package, by layer, lowest first (the order of ``ARCHITECTURE.md``):
the modules every layer uses and that use none (redaction, errors, names, sizes, process
liveness, the entry-point groups), the snapshot model and store, the seam, the services,
the containers, the capture, the replay, and what stands on the replay (reports, regression
checks, explanations, OpenTelemetry, sweeps, Kubernetes, doctor, the pytest plugin, the
package's own ``__init__``). ``cli/`` stands above them all."""
REPLAY_LAYERS: tuple[str, ...] = (
    "sandbox.replay.conditions",
    "sandbox.replay.judging",
    "sandbox.replay.serving",
    "sandbox.replay.isolation",
    "sandbox.replay",
)
"""The replay's own groups, lowest first (the order of ``ARCHITECTURE.md``): the conditions
a run runs under (clock, faults, order, deadline), judging (what an event means, divergence,
coverage, the verdict), serving (policies, matching, routing, overrides), the replayed
process's isolation (environment, network guard, redirection, trust, live processes, the
runner container), and the engine with its session, boundary and fork at the top."""
LOWER = (
    "sandbox.capture",
    "sandbox.seam",
    "sandbox.snapshot",
    "sandbox.services",
    "sandbox.containers",
)
SEAM = "sandbox.seam"
SEAM_MAY_IMPORT = ("sandbox.seam", "sandbox.snapshot", "sandbox.errors")
UPPER = "sandbox.replay"
CAPTURE = "sandbox.capture"
BELOW_CAPTURE = ("sandbox.seam", "sandbox.snapshot", "sandbox.services")
REDACTION = "sandbox.redaction"
ALLOWED_UPWARD = {
    ("sandbox.capture._site.sitecustomize", "sandbox.replay.command"),
    ("sandbox.capture._site.sitecustomize", "sandbox.replay.isolation.liveprocess"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may load (for ``from X import y``: ``X.y``, which
    is the submodule when there is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = module.split(".")
        base = parts if is_package else parts[:-1]
        base = base[: len(base) - node.level + 1]
        prefix = ".".join([*base, node.module] if node.module else base)
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}" for alias in node.names]


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``sandbox`` it imports, at any depth of its code."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(node, module, path.name == "__init__.py"):
                    found = _resolve(name, modules)
                    if found is not None and found != module:
                        targets.add(found)
        graph[module] = targets
    return graph


def test_the_graph_is_read_from_the_source() -> None:
    """The reader sees top-level imports, ``from package import submodule`` and imports inside
    functions."""
    graph = import_graph()
    assert "sandbox.services.registry" in graph["sandbox.services"]
    assert "sandbox.explain.parts" in graph["sandbox.explain.trials"]
    assert "sandbox.replay.command" in graph["sandbox.capture._site.sitecustomize"]  # lazy


def _layer(module: str) -> int | None:
    """The index in :data:`LAYERS` of the layer ``module`` belongs to (``sandbox`` itself
    names the package's ``__init__`` only)."""
    for index, layer in enumerate(LAYERS):
        for name in layer:
            if module == name or (name != "sandbox" and module.startswith(name + ".")):
                return index
    return None


def test_every_module_has_its_layer() -> None:
    """A new module or package is placed in :data:`LAYERS` (no module falls outside it)."""
    assert [m for m in import_graph() if _layer(m) is None] == []


def test_no_module_imports_a_higher_layer() -> None:
    """The full order: a module imports only modules of its own layer or lower ones (the
    boot hook's edges to the replay child are the one exception)."""
    upward = {
        (module, target)
        for module, targets in import_graph().items()
        for target in targets
        if (_layer(target) or 0) > (_layer(module) or 0)
    }
    assert upward == ALLOWED_UPWARD


def test_the_package_never_imports_the_cli() -> None:
    """``cli/`` is the top: the package never imports it, lazily or not."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found |= {(str(path), n) for n in names if n == "cli" or n.startswith("cli.")}
    assert found == set()


def _replay_layer(module: str) -> int:
    """The index in :data:`REPLAY_LAYERS` of a module of ``sandbox.replay``."""
    return next(
        i for i, name in enumerate(REPLAY_LAYERS) if module == name or module.startswith(name + ".")
    )


def test_the_replay_groups_import_one_way() -> None:
    """Inside the replay, a group imports only its own modules and those of lower groups:
    judging never reaches serving, serving never the isolation, none of them the engine."""
    graph = import_graph()
    replay = {m for m in graph if m == UPPER or m.startswith(UPPER + ".")}
    assert {"sandbox.replay.judging.verdict", "sandbox.replay.serving.policy"} <= replay
    upward = {
        (module, target)
        for module in replay
        for target in graph[module]
        if target in replay and _replay_layer(target) > _replay_layer(module)
    }
    assert upward == set()


def test_lower_layers_never_import_replay() -> None:
    upward = {
        (module, target)
        for module, targets in import_graph().items()
        if module.startswith(LOWER)
        for target in targets
        if target == UPPER or target.startswith(UPPER + ".")
    }
    assert upward == ALLOWED_UPWARD


def test_the_seam_imports_neither_capture_nor_replay() -> None:
    """Capture and replay both build on the seam; it reads only the snapshot model."""
    graph = import_graph()
    seam = {m for m in graph if m == SEAM or m.startswith(SEAM + ".")}
    assert {"sandbox.seam.boundary", "sandbox.seam.llm"} <= seam
    outside = {(m, t) for m in seam for t in graph[m] if not t.startswith(SEAM_MAY_IMPORT)}
    assert outside == set()


def test_services_snapshot_and_seam_never_import_capture() -> None:
    """What capture builds on (the seam, the snapshot store, the service kinds with their
    masking and the scan before export) never imports the capture package: the redaction
    both need stands below them all."""
    reached = {
        (module, target)
        for module, targets in import_graph().items()
        if module.startswith(BELOW_CAPTURE)
        for target in targets
        if target == CAPTURE or target.startswith(CAPTURE + ".")
    }
    assert reached == set()


def test_redaction_imports_nothing_of_the_package() -> None:
    graph = import_graph()
    assert graph[REDACTION] == set()
    users = {m for m, targets in graph.items() if REDACTION in targets}
    assert {"sandbox.services.masking", "sandbox.services.sharescan"} <= users
    assert {"sandbox.capture.recorder", "sandbox.replay.boundary"} <= users


def test_replay_reaches_the_seam_not_the_capture_adapters() -> None:
    """Replay routes and serves crossings through the seam's contract: it never imports the
    capture's boundary adapters (the HTTP adapter, the tools, the clock's patches ...)."""
    adapters = ("sandbox.capture.http", "sandbox.capture.tools", "sandbox.capture.memory")
    reached = {
        (module, target)
        for module, targets in import_graph().items()
        if module.startswith(UPPER)
        for target in targets
        if target.startswith(adapters)
    }
    assert reached == set()


def test_no_import_cycle_counting_lazy_imports() -> None:
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
