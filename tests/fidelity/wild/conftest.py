"""Real MCP servers from PyPI for the agents here. ``mcp-server-sqlite`` needs ``mcp<2``
(ours is 2.x), so it lives in a venv of its own, ``.venv-mcp-sqlite`` at the top of the
repository (gitignored; ``make setup`` makes it, and so does this fixture the first time),
the way people run MCP servers with ``uvx``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SQLITE_VENV = ROOT / ".venv-mcp-sqlite"
SQLITE_REQUIREMENTS = ("mcp-server-sqlite==2025.4.25", "mcp<2")


@pytest.fixture(scope="session")
def sqlite_mcp() -> Path:
    """The ``mcp-server-sqlite`` program, installed in its venv when it is not yet."""
    program = SQLITE_VENV / "bin" / "mcp-server-sqlite"
    if not program.exists():
        subprocess.run([sys.executable, "-m", "venv", str(SQLITE_VENV)], check=True)
        pip = [str(SQLITE_VENV / "bin" / "pip"), "install", "-q", *SQLITE_REQUIREMENTS]
        subprocess.run(pip, check=True, timeout=600)
    return program
