"""The stale answer: a support agent searches the policy documents, the retriever ranks by
keyword overlap only, the 2023 returns policy (30 days) wins over the current one (14 days),
and the customer is told 30 days.

``main`` is the agent as captured; ``main_fixed`` ranks the matching documents by their
``updated:`` header first (the newest policy wins), so the answer says 14 days.

Service: ``SUPPORT_DOCS``, a folder of policy documents (a ``files`` workspace). Each document
starts with a title line and an ``updated: YYYY-MM-DD`` header.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.snapshot.manifest import ResultPredicate

SYSTEM = "You answer customer questions. Call search_docs once, then answer from what it finds."
USER = "How many days do I have to return an item?"
DOCS_ENV = "SUPPORT_DOCS"
STALE_ANSWER = ResultPredicate(path="answer", op="contains", value="30 days")
"""The failure: the final answer quotes the 2023 return window."""

DOCUMENTS: dict[str, str] = {
    "returns-2023.md": (
        "# Returns policy\n"
        "updated: 2023-02-01\n"
        "\n"
        "How many days do I have to return an item? You have 30 days to return an item,\n"
        "counted from the day it was delivered. Return an item in its original packaging.\n"
    ),
    "returns-2024.md": (
        "# Returns policy\n"
        "updated: 2024-03-15\n"
        "\n"
        "How long do I have to return an item? Items can be returned within 14 days of\n"
        "delivery, in their original packaging.\n"
    ),
    "shipping.md": (
        "# Shipping\n"
        "updated: 2024-01-10\n"
        "\n"
        "Orders ship within 2 business days. Delivery takes 3 to 5 days.\n"
    ),
}
TOOLS = [
    tool_spec(
        "search_docs",
        "Search the policy documents; returns the best match.",
        {"query": {"type": "string"}},
    )
]
_WORD = re.compile(r"[a-z0-9]+")
_UPDATED = re.compile(r"^updated:\s*(\d{4}-\d{2}-\d{2})\s*$", re.MULTILINE)
_DAYS = re.compile(r"\b(\d+) days\b")


def write_documents(folder: str | os.PathLike[str]) -> Path:
    """Fill ``folder`` with the policy documents (the "production" workspace)."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in DOCUMENTS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    done = last_tool_results(messages)
    if done:
        days = _DAYS.search(done[-1])
        if days is None:
            return {"content": "Sorry, I could not find our returns policy."}
        return {"content": f"You have {days.group(1)} days to return an item."}
    return {"tool_calls": [{"name": "search_docs", "arguments": {"query": USER}}]}


def _docs() -> list[tuple[str, str]]:
    root = Path(os.environ[DOCS_ENV])
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(root.glob("*.md"))]


def _overlap(query: str, text: str) -> int:
    return len(set(_WORD.findall(query.lower())) & set(_WORD.findall(text.lower())))


def _updated(text: str) -> str:
    found = _UPDATED.search(text)
    return found.group(1) if found else ""


def _hit(name: str, text: str, score: int) -> dict[str, Any]:
    return {"id": name, "content": text, "score": score, "metadata": {"updated": _updated(text)}}


@capture.retriever
def search_docs(query: str) -> list[dict[str, Any]]:
    """The best match by keyword overlap only (the bug: an old document that repeats the
    question's words beats the current one)."""
    scored = [(_overlap(query, text), name, text) for name, text in _docs()]
    score, name, text = max(scored, key=lambda s: (s[0], s[1]))
    return [_hit(name, text, score)]


@capture.retriever("search_docs")
def search_docs_fixed(query: str) -> list[dict[str, Any]]:
    """The fix: among the documents that match at all, the most recently updated wins."""
    scored = [(_overlap(query, text), name, text) for name, text in _docs()]
    best = max(s[0] for s in scored)
    matching = [s for s in scored if s[0] >= best / 2]
    score, name, text = max(matching, key=lambda s: (_updated(s[2]), s[0]))
    return [_hit(name, text, score)]


def _run(search: Any) -> str:
    with scripted_model(script) as client:
        answer = agent_loop(client, SYSTEM, USER, TOOLS, {"search_docs": search})
    capture.result({"answer": answer})
    return answer


def main() -> str:
    """The agent as it ran in production (keyword-overlap ranking)."""
    return _run(search_docs)


def main_fixed() -> str:
    """The fix: the newest matching document wins."""
    return _run(search_docs_fixed)
