"""``@tool`` and ``@retriever``: decorators that send a function's calls through the seam.

Both work on plain and ``async`` functions, bare (``@tool``) or named (``@tool("search")``).
Outside a capture or replay they cost one lookup and call the function unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast, overload

from pydantic import JsonValue

from sandbox.capture.schema import tool_schema
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome, RecordedError
from sandbox.snapshot.events import Event, Retrieval, RetrievedDoc, ToolCall
from sandbox.snapshot.hashing import sha256_bytes

F = TypeVar("F", bound=Callable[..., Any])


def bind_arguments(
    sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, JsonValue]:
    """The call's arguments by parameter name, defaults applied, as JSON (``self`` dropped)."""
    from sandbox.capture.recorder import jsonable_value

    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return {"args": jsonable_value(list(args)), "kwargs": jsonable_value(kwargs)}
    bound.apply_defaults()
    out: dict[str, JsonValue] = {}
    for name, value in bound.arguments.items():
        if name in {"self", "cls"}:
            continue
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update({k: jsonable_value(v) for k, v in value.items()})
        else:
            out[name] = jsonable_value(value)
    return out


class ToolAdapter:
    """Records a ``tool`` event (schema, arguments, output or error, start and duration);
    replay hands back the recorded output (JSON) or raises the recorded error."""

    def __init__(self, schema: dict[str, JsonValue]) -> None:
        self.schema = schema

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        args = call.request if isinstance(call.request, dict) else {"args": call.request}
        common: dict[str, Any] = {
            "tool_schema": self.schema,
            "args": args,
            "started": call.started,
            "duration": outcome.duration,
        }
        if outcome.error is not None:
            emitter.emit(ToolCall, call, error=boundary.error_info(outcome.error), **common)
            return None
        output, blob = emitter.jsonable(outcome.value)
        emitter.emit(ToolCall, call, output=output, output_blob=blob, **common)
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, ToolCall)
        if event.error is not None:
            raise RecordedError(event.error)
        if event.output_blob is not None:
            return json.loads(blobs(event.output_blob.sha256))
        return event.output


class _Binder:
    """Arguments by name, fast for the common case (positional and keyword arguments to
    plain parameters); anything unusual goes through :func:`bind_arguments`."""

    def __init__(self, sig: inspect.Signature) -> None:
        self.sig = sig
        params = list(sig.parameters.values())
        self.simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        self.positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        self.names = {p.name for p in params}
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.drop = {"self", "cls"} & self.names

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, JsonValue]:
        from sandbox.capture.recorder import jsonable_value

        if not self.simple or len(args) > len(self.positional):
            return bind_arguments(self.sig, args, kwargs)
        out = dict(zip(self.positional, args, strict=False))
        for key, value in kwargs.items():
            if key in out or key not in self.names:
                return bind_arguments(self.sig, args, kwargs)
            out[key] = value
        if len(out) < len(self.names):
            for key, value in self.defaults.items():
                out.setdefault(key, value)
            if len(out) < len(self.names):
                return bind_arguments(self.sig, args, kwargs)
        for key in self.drop:
            out.pop(key, None)
        data = jsonable_value(out)
        return data if isinstance(data, dict) else {}


def _wrap(fn: F, kind: str, name: str, adapter: Any) -> F:
    bind = _Binder(inspect.signature(fn))
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            if boundary.current() is None:
                return await fn(*args, **kwargs)
            request = bind(args, kwargs)
            return await boundary.athrough(
                kind, name, request, lambda: fn(*args, **kwargs), adapter
            )

        return cast(F, awrapper)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if boundary.current() is None:
            return fn(*args, **kwargs)
        request = bind(args, kwargs)
        return boundary.through(kind, name, request, lambda: fn(*args, **kwargs), adapter)

    return cast(F, wrapper)


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(name: str | None = None, /) -> Callable[[F], F]: ...
def tool(fn: F | str | None = None, /) -> F | Callable[[F], F]:
    """Record every call of the decorated function as a ``tool`` event.

    ``@tool`` or ``@tool("name")``; sync or async. The schema (name, description, parameters
    as JSON Schema) comes from the signature."""

    def decorate(f: F, name: str | None = None) -> F:
        schema = tool_schema(f, name)
        return _wrap(f, "tool", str(schema["name"]), ToolAdapter(schema))

    if callable(fn):
        return decorate(fn)
    return lambda f: decorate(f, fn)


# --- retrieval -----------------------------------------------------------------------------


def _doc_parts(doc: Any) -> tuple[str | None, str, float | None, dict[str, Any]]:
    """(id, content, score, metadata) of a retrieved document in any common shape: a mapping
    (``id``, ``content``/``text``/``page_content``, ``score``, ``metadata``), an ``(id,
    content)`` pair, a string, or an object with those attributes (LangChain documents)."""
    if isinstance(doc, str):
        return None, doc, None, {}
    if isinstance(doc, tuple) and len(doc) >= 2:
        return str(doc[0]), str(doc[1]), float(doc[2]) if len(doc) > 2 else None, {}
    get: Callable[[str], Any]
    if isinstance(doc, Mapping):
        get = doc.get
    else:

        def get(key: str) -> Any:
            return getattr(doc, key, None)

    content = next((get(k) for k in ("content", "text", "page_content") if get(k) is not None), "")
    meta = get("metadata") or {}
    ident = (
        get("id")
        if get("id") is not None
        else (meta.get("id") if isinstance(meta, Mapping) else None)
    )
    score = get("score")
    return (
        None if ident is None else str(ident),
        content if isinstance(content, str) else json.dumps(content, default=repr),
        float(score) if score is not None else None,
        dict(meta) if isinstance(meta, Mapping) else {},
    )


class RetrievalAdapter:
    """Records a ``retrieval`` event: the query and each document's id, content SHA-256 and
    content (as a blob). Replay hands back the documents as dicts."""

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        from sandbox.capture.recorder import jsonable_value

        request = call.request if isinstance(call.request, dict) else {}
        query = request.get("query", next(iter(request.values()), None))
        if outcome.error is not None:
            emitter.emit(Retrieval, call, query=query, error=boundary.error_info(outcome.error))
            return None
        docs: list[RetrievedDoc] = []
        for doc in outcome.value or []:
            ident, content, score, meta = _doc_parts(doc)
            data = content.encode("utf-8", "surrogateescape")
            blob = emitter.store_payload(data, "text/plain; charset=utf-8")
            docs.append(
                RetrievedDoc(
                    id=ident if ident is not None else hashlib.sha256(data).hexdigest()[:16],
                    sha256=sha256_bytes(data),
                    blob=blob,
                    score=score,
                    metadata={k: jsonable_value(v) for k, v in meta.items()},
                )
            )
        emitter.emit(Retrieval, call, query=query, documents=docs)
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, Retrieval)
        if event.error is not None:
            raise RecordedError(event.error)
        return [
            {
                "id": d.id,
                "content": blobs(d.blob.sha256).decode() if d.blob else None,
                "score": d.score,
                "metadata": d.metadata,
            }
            for d in event.documents
        ]


@overload
def retriever(fn: F, /) -> F: ...
@overload
def retriever(name: str | None = None, /) -> Callable[[F], F]: ...
def retriever(fn: F | str | None = None, /) -> F | Callable[[F], F]:
    """Record every call of the decorated search function as a ``retrieval`` event."""

    def decorate(f: F, name: str | None = None) -> F:
        return _wrap(f, "retrieval", name or f.__name__, RetrievalAdapter())

    if callable(fn):
        return decorate(fn)
    return lambda f: decorate(f, fn)
