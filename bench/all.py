"""Run every benchmark module's ``main()`` in turn: ``python -m bench.all``."""

from __future__ import annotations

import importlib
from pathlib import Path


def modules() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        f"bench.{p.stem}"
        for p in here.glob("*.py")
        if p.stem not in {"all", "__init__"} and not p.stem.startswith("_")
    )


def main() -> int:
    for name in modules():
        print(f"== {name}")
        importlib.import_module(name).main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
