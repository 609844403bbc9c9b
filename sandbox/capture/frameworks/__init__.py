"""Tool calls made inside agent frameworks, captured as ``tool`` events with no decorators.

Each integration is one small module: an :class:`~sandbox.capture.imports.ImportPatch` on
the framework's tool execution that sends each call through the seam as a ``tool`` call
(the tool's name, its schema, the arguments, the output or error), so that replay serves it
recorded or live per tool (``--recorded tool:NAME`` / ``--live tool:NAME``) like a
``capture.tool`` function. An integration activates only when its framework is imported.
"""

from __future__ import annotations

from sandbox.capture.frameworks import langchain, openai_agents, pydantic_ai, smolagents
from sandbox.capture.imports import ImportPatch, Undo, undo_all

INTEGRATIONS: dict[str, ImportPatch] = {
    "langchain": langchain.PATCH,
    "openai_agents": openai_agents.PATCH,
    "pydantic_ai": pydantic_ai.PATCH,
    "smolagents": smolagents.PATCH,
}
"""Framework integrations by name."""


def patch_frameworks() -> Undo:
    """Capture the tool calls of every framework in :data:`INTEGRATIONS` (when imported)."""
    return undo_all([patch.start() for patch in INTEGRATIONS.values()])
