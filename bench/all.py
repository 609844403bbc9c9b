"""Run every benchmark module, then print one table of the figures they recorded
(:mod:`bench.compare`): figure, goal, median, spread, whether the goal holds.

``python -m bench.all`` runs each module at its full scale; ``--quick`` runs each module
that declares ``QUICK`` (its arguments for small scales) with them, and skips the others.
A module is found by its file name (``bench/<name>.py``); it records its figures with
:func:`bench.compare.record`."""

from __future__ import annotations

import argparse
import importlib
import inspect
from pathlib import Path
from types import ModuleType

from bench.compare import FIGURES, table


def modules() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        f"bench.{p.stem}"
        for p in here.glob("*.py")
        if p.stem not in {"all", "compare", "__init__"} and not p.stem.startswith("_")
    )


def run(module: ModuleType, quick: bool) -> bool:
    """Run one module's ``main``; ``False`` when it has no quick mode and ``quick`` is set."""
    takes_args = bool(inspect.signature(module.main).parameters)
    if quick:
        args = getattr(module, "QUICK", None)
        if args is None:
            return False
        module.main(list(args)) if takes_args else module.main()
    else:
        module.main([]) if takes_args else module.main()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.all", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small scales, quick modules only")
    parser.add_argument("only", nargs="*", help="module names (default: all)")
    args = parser.parse_args(argv)
    skipped = []
    for name in modules():
        if args.only and name.removeprefix("bench.") not in args.only:
            continue
        print(f"== {name}", flush=True)
        if not run(importlib.import_module(name), args.quick):
            skipped.append(name)
            print("(no quick mode: skipped)")
    print()
    print(table(FIGURES))
    if skipped:
        print(f"skipped in --quick: {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
