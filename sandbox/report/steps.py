"""A run's events as the page draws them: one step per boundary call, in a tree.

- **Each model call once.** A model call captured at the transport leaves an ``http``
  exchange and the ``llm`` call it carried (linked by span); the page shows the ``llm`` step,
  with the exchange folded into it (``h``), not as a second row.
- **Tool calls under the message that asked for them.** A top-level tool call whose name the
  latest model response asked for is nested under that model call; every other event sits
  under the call that enclosed it (``parent``, ``parent_span``): retries, timeouts, the HTTP
  exchanges and inner tool calls of a tool.
- **Random draws folded.** A random draw (``uuid4``, ``os.urandom``, a seed) is no step of
  its own: it is listed in the step it happened in (``r``), and draws at the top level one
  after another (whatever their tasks) are one collapsed row (kind ``random``, ``r`` its
  draws). The divergent step stays a step, whatever its kind.
- **Times for the waterfall.** ``s`` is when a step began and ``d`` how long it took, in
  seconds since the run started (``mono`` is when it completed).

The page's data is small on purpose (a 10,000-event run): the raw event is kept once (``x``)
and the page builds every view from it; conversation messages, repeated in full by every
model call, are kept once in a pool and referenced by number; very long strings are cut.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import SandboxError
from sandbox.snapshot.events import Event, HTTPExchange, LLMCall, RandomDraw, Retrieval
from sandbox.snapshot.snapshot import Snapshot

BlobReader = Callable[[str], bytes]
MAX_TEXT = 20_000
"""Characters kept of any one string of an event; the rest is cut, and the page says so."""


@dataclass
class MessagePool:
    """Conversation messages kept once each, by their JSON text."""

    items: list[Any] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def refs(self, messages: Iterable[Any]) -> list[int]:
        import json

        out: list[int] = []
        for message in messages:
            key = json.dumps(message, sort_keys=True, separators=(",", ":"), default=str)
            found = self._index.get(key)
            if found is None:
                found = self._index[key] = len(self.items)
                self.items.append(cut(message))
            out.append(found)
        return out


def cut(value: Any, limit: int = MAX_TEXT) -> Any:
    """``value`` with every string longer than ``limit`` cut, marked with what was left out."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}… ({len(value) - limit} more characters)"
    if isinstance(value, dict):
        return {k: cut(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cut(v, limit) for v in value]
    return value


def _duration(event: Event) -> float:
    return float(getattr(event, "duration", 0.0) or 0.0)


def _start(event: Event) -> float:
    started = getattr(event, "started", 0.0) or 0.0
    return float(started) if started else max(event.mono - _duration(event), 0.0)


def _documents(event: Retrieval, blobs: BlobReader | None) -> list[dict[str, Any]]:
    """The retrieved documents, each with its content when its blob is small and at hand."""
    out: list[dict[str, Any]] = []
    for doc in event.documents:
        item: dict[str, Any] = doc.model_dump(mode="json", exclude_defaults=True)
        if blobs is not None and doc.blob is not None and doc.blob.size <= MAX_TEXT:
            with contextlib.suppress(SandboxError, OSError):
                item["content"] = blobs(doc.blob.sha256).decode("utf-8", "replace")
        out.append(item)
    return out


def _raw(
    event: Event, pool: MessagePool, blobs: BlobReader | None, *, whole: bool = False
) -> dict[str, Any]:
    """The event as JSON; unless ``whole``, without the four fields the step carries once
    (``q``, ``k``, ``n``, ``t``)."""
    slim = set() if whole else {"seq", "kind", "name", "task"}
    data: dict[str, Any] = event.model_dump(mode="json", exclude_defaults=True, exclude=slim)
    if whole:
        data.update(seq=event.seq, kind=event.kind)
    if isinstance(event, Retrieval) and event.documents:
        data["documents"] = _documents(event, blobs)
    if isinstance(event, LLMCall) and event.messages:
        data["messages"] = {"$pool": pool.refs(event.messages)}
    if isinstance(event, HTTPExchange) and isinstance(event.request_body, dict):
        messages = event.request_body.get("messages")
        if isinstance(messages, list):
            body = dict(data["request_body"])
            body["messages"] = {"$pool": pool.refs(messages)}
            data["request_body"] = body
    return cut(data)  # type: ignore[no-any-return]


def _folded_http(events: Sequence[Event]) -> dict[int, int]:
    """``llm index → http index`` for each model call whose transport exchange was captured
    too (one encloses the other by span)."""
    by_span = {e.span: i for i, e in enumerate(events) if e.span is not None}
    inside = {
        e.parent_span: i
        for i, e in enumerate(events)
        if isinstance(e, HTTPExchange) and e.parent_span is not None
    }
    out: dict[int, int] = {}
    for i, event in enumerate(events):
        if not isinstance(event, LLMCall):
            continue
        outer = by_span.get(event.parent_span) if event.parent_span is not None else None
        if outer is not None and isinstance(events[outer], HTTPExchange):
            out[i] = outer
            continue
        inner = inside.get(event.span) if event.span is not None else None
        if inner is not None:
            out[i] = inner
    return out


def _parents(events: Sequence[Event], folded: dict[int, int]) -> dict[int, int]:
    """``index → parent index`` from ``parent`` (a seq) and ``parent_span``; an event
    inside a folded exchange belongs to its model call."""
    host = {http: llm for llm, http in folded.items()}
    by_seq = {e.seq: i for i, e in enumerate(events)}
    by_span = {e.span: i for i, e in enumerate(events) if e.span is not None}
    out: dict[int, int] = {}
    for i, event in enumerate(events):
        parent: int | None = None
        if event.parent is not None:
            parent = by_seq.get(event.parent)
        if parent is None and event.parent_span is not None:
            parent = by_span.get(event.parent_span)
        if parent is not None:
            parent = host.get(parent, parent)
        if parent is not None and parent != host.get(i, i):
            out[host.get(i, i)] = parent
    for http in host:
        out.pop(http, None)
    return out


def _asked(events: Sequence[Event], order: Sequence[int], parents: dict[int, int]) -> None:
    """Nest each top-level tool call under the latest model call that asked for it by name."""
    pending: list[tuple[int, list[str]]] = []
    for i in order:
        event = events[i]
        if isinstance(event, LLMCall):
            response = event.response if isinstance(event.response, dict) else {}
            calls = response.get("tool_calls")
            calls = calls if isinstance(calls, list) else []
            names = [str(c.get("name", "")) for c in calls if isinstance(c, dict)]
            if names:
                pending.append((i, names))
        elif event.kind == "tool" and i not in parents:
            for llm, names in reversed(pending):
                if event.name in names:
                    names.remove(event.name)
                    parents[i] = llm
                    break


def _draw(event: RandomDraw) -> dict[str, Any]:
    """A random draw as a folded entry: its seq, source, and the seed or value drawn."""
    entry: dict[str, Any] = {"q": event.seq, "src": event.source, "t": event.task}
    if event.seed is not None:
        entry["seed"] = event.seed
    if event.value is not None:
        entry["v"] = cut(event.value, 200)
    return entry


def _draws_name(draws: Sequence[dict[str, Any]]) -> str:
    """``3 draws: uuid4 x2, random.seed``."""
    counts: dict[str, int] = {}
    for d in draws:
        counts[d["src"]] = counts.get(d["src"], 0) + 1
    sources = ", ".join(f"{src} x{n}" if n > 1 else src for src, n in counts.items())
    return f"{len(draws)} draw{'s' if len(draws) > 1 else ''}: {sources}"


def page_data(
    snapshot: Snapshot, label: str, mark: int | None, blobs: BlobReader | None = None
) -> dict[str, Any]:
    """One side of the page: ``{"run", "label", "mark", "steps", "roots", "pool", "tasks"}``.

    ``mark`` is the seq of the divergent step on this side, if any.
    """
    events = snapshot.events
    folded = _folded_http(events)
    hidden = set(folded.values())
    order = sorted(range(len(events)), key=lambda i: (_start(events[i]), events[i].seq))
    parents = _parents(events, folded)
    _asked(events, sorted(range(len(events)), key=lambda i: events[i].seq), parents)
    draws = {i for i, e in enumerate(events) if isinstance(e, RandomDraw) and e.seq != mark}
    pool = MessagePool()
    index: dict[int, int] = {}
    steps: list[dict[str, Any]] = []
    for i in order:
        if i in hidden or i in draws:
            continue
        event = events[i]
        index[i] = len(steps)
        step: dict[str, Any] = {
            "q": event.seq,
            "k": event.kind,
            "n": event.name,
            "t": event.task,
            "s": round(_start(event), 6),
            "d": round(_duration(event), 6),
            "c": [],
            "x": _raw(event, pool, blobs),
        }
        if i in folded:
            step["h"] = _raw(events[folded[i]], pool, blobs, whole=True)
        if getattr(event, "error", None) is not None:
            step["e"] = 1
        steps.append(step)
    roots: list[int] = []
    group: int | None = None  # the collapsed row of the draws at the top level just before
    for i in order:
        if i in hidden:
            continue
        parent = parents.get(i)
        event = events[i]
        if i in draws and isinstance(event, RandomDraw):
            if parent is not None and parent in index:
                steps[index[parent]].setdefault("r", []).append(_draw(event))
                continue
            if group is None:
                group = len(steps)
                steps.append(
                    {"q": event.seq, "k": "random", "n": "", "t": event.task,
                     "s": round(_start(event), 6), "d": 0.0, "c": [], "x": {}, "r": []}
                )  # fmt: skip
                roots.append(group)
            steps[group]["r"].append(_draw(event))
            continue
        if parent is not None and parent in index:
            steps[index[parent]]["c"].append(index[i])
        else:
            group = None  # a row at the top level ends the draws before it
            roots.append(index[i])
    for step in steps:
        if step["k"] == "random" and "r" in step and not step["n"]:
            step["n"] = _draws_name(step["r"])
    tasks = list(dict.fromkeys(e.task for e in events))
    return {
        "run": snapshot.run_id,
        "label": label,
        "mark": mark,
        "steps": steps,
        "roots": roots,
        "pool": pool.items,
        "tasks": tasks,
        "end": round(max((e.mono for e in events), default=0.0), 6),
    }
