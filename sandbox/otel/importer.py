"""An OTLP/JSON trace as a run of the store, every boundary served from the trace.

The trace is read from the GenAI semantic conventions, with OpenInference attributes where
the GenAI ones are missing: a span whose ``gen_ai.operation.name`` is ``chat`` (or
``text_completion``), or whose ``openinference.span.kind`` is ``LLM``, is a model call; an
``execute_tool`` (or ``TOOL``) span a tool call; the root span the run (its ``output.value``
the final result). A model call becomes the two events capture writes for one: the HTTP
exchange, with the provider's request and response bodies rebuilt from the recorded call by
the first registered model API of its provider (:func:`sandbox.seam.llm.for_provider`), and
the ``llm`` event inside it, read back from that request as replay reads the live call, so
that replay serves the agent's real SDK client from it.

The run has no environment state (no services, no seeds): ``sandbox show`` says it was
imported. Its failure is the one ``sandbox otel export`` wrote (``sandbox.failure``), the
exception the root span ended with, or the predicate given to :func:`import_otlp_json`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status, TracesData
from pydantic import JsonValue, ValidationError

from sandbox.errors import OTelImportError
from sandbox.names import IMPORTED_FROM_LABEL, TRACE_SOURCE
from sandbox.otel import messages
from sandbox.otel.attributes import OPERATION, PARAMS, SPAN_KIND
from sandbox.otel.export import FAILURE_EXCEPTION
from sandbox.seam import llm
from sandbox.snapshot.events import (
    ErrorInfo,
    Event,
    FinalResult,
    HTTPExchange,
    LLMCall,
    ToolCall,
)
from sandbox.snapshot.manifest import (
    RUN_ID_PATTERN,
    Clock,
    Entrypoint,
    Failure,
    Manifest,
    ModelInfo,
    Predicate,
)
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.store import Store, check_run_id

MAX_TRACE_BYTES = 64 * 1024 * 1024
"""An OTLP/JSON file larger than this is refused before it is parsed."""

IMPORT_SEED = 0
"""A trace records no seed; replay seeds the agent's generators (and so patches its HTTP
clients, through which the model calls are served) with this one."""

SOURCE_LABEL = IMPORTED_FROM_LABEL
SOURCE = TRACE_SOURCE

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


@dataclass
class SpanRecord:
    """One span of the file, with its attributes decoded."""

    span_id: str
    parent_id: str
    trace_id: str
    name: str
    start: float
    end: float
    attributes: dict[str, Any]
    error: ErrorInfo | None = None


_FAILED_FIELD = r"Failed to parse (\w+) field: "
_ID_FIELDS = frozenset(
    {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}
)


def _base64_ids(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping reads base64
    (the inverse of :func:`sandbox.otel.export.otlp_json`)."""
    if isinstance(value, list):
        return [_base64_ids(v) for v in value]
    if isinstance(value, dict):
        return {
            k: _base64_id(v) if k in _ID_FIELDS and isinstance(v, str) else _base64_ids(v)
            for k, v in value.items()
        }
    return value


def _base64_id(text: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(text)).decode()
    except ValueError:
        raise OTelImportError(f"not OTLP/JSON: the id {text[:40]!r} is not hex") from None


def _any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as Python (``None`` for an empty one or bytes)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return None if kind in (None, "bytes_value") else getattr(value, kind)


def _attributes(items: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in items}


def _error_of(span: Span) -> ErrorInfo | None:
    """The exception a span ended with: its ``exception`` event, else its ``ERROR`` status.
    A run whose failure a predicate observed (``sandbox otel export`` marks its exception
    event :data:`FAILURE_EXCEPTION`) ended with no exception."""
    if span.status.code != Status.STATUS_CODE_ERROR:
        return None
    observed = False
    for event in span.events:
        if event.name == "exception":
            attrs = _attributes(event.attributes)
            kind = str(attrs.get("exception.type", "Exception"))
            if kind == FAILURE_EXCEPTION:
                observed = True
                continue
            return ErrorInfo(type=kind, message=str(attrs.get("exception.message", "")))
    if observed:
        return None
    return ErrorInfo(type="Exception", message=span.status.message)


def read_spans(data: bytes) -> list[SpanRecord]:
    """Every span of an OTLP/JSON ``ExportTraceServiceRequest`` (or a JSON Lines file of
    them, as a collector's file exporter writes), read by protobuf's JSON mapping."""
    if len(data) > MAX_TRACE_BYTES:
        raise OTelImportError(f"the trace file is larger than {MAX_TRACE_BYTES} bytes")
    documents: list[Any] = []
    try:
        text = data.decode("utf-8")
        try:
            documents.append(json.loads(text))
        except ValueError:
            documents.extend(json.loads(line) for line in text.splitlines() if line.strip())
    except (ValueError, RecursionError) as exc:
        raise OTelImportError(f"not OTLP/JSON: {exc}") from None
    spans: list[SpanRecord] = []
    for doc in documents:
        if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
            raise OTelImportError("not OTLP/JSON: expected an object with 'resourceSpans'")
        traces = TracesData()
        try:
            json_format.ParseDict(_base64_ids(doc), traces, ignore_unknown_fields=True)
        except (json_format.ParseError, RecursionError) as exc:
            raise OTelImportError(f"not OTLP/JSON: {_parse_error(exc)}") from None
        for resource in traces.resource_spans:
            for scope in resource.scope_spans:
                spans.extend(_span(raw) for raw in scope.spans)
    if not spans:
        raise OTelImportError("the file holds no spans")
    return spans


def _parse_error(exc: Exception) -> str:
    """protobuf's nested "Failed to parse A field: Failed to parse B field: why" as
    ``A.B: why``, on one line."""
    text = " ".join(str(exc).split())
    path = ".".join(re.findall(_FAILED_FIELD, text))
    reason = re.sub(f"(?:{_FAILED_FIELD})+", "", text).rstrip(".")
    return f"{path}: {reason}" if path else reason


def _span(raw: Span) -> SpanRecord:
    if not raw.span_id:
        raise OTelImportError("not OTLP/JSON: a span without a spanId")
    return SpanRecord(
        span_id=raw.span_id.hex(),
        parent_id=raw.parent_span_id.hex(),
        trace_id=raw.trace_id.hex(),
        name=raw.name,
        start=raw.start_time_unix_nano / 1e9,
        end=raw.end_time_unix_nano / 1e9,
        attributes=_attributes(raw.attributes),
        error=_error_of(raw),
    )


def _json(value: Any, default: Any = None) -> Any:
    if not isinstance(value, str):
        return default if value is None else value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _kind(span: SpanRecord) -> str | None:
    operation = span.attributes.get(OPERATION)
    oi = span.attributes.get(SPAN_KIND)
    if not isinstance(operation, str | None):  # an array or a number: not an operation name
        return None
    if operation in _LLM_OPERATIONS or (operation is None and oi == "LLM"):
        return "llm"
    if operation == "execute_tool" or (operation is None and oi == "TOOL"):
        return "tool"
    return None


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.{i}.rest`` attributes (OpenInference's flattening) as a list of dicts."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        index, _, rest = key[len(prefix) + 1 :].partition(".")
        if index.isdigit():
            found.setdefault(int(index), {})[rest] = value
    return [found[i] for i in sorted(found)]


def _openinference_wire(attrs: Mapping[str, Any], prefix: str) -> list[JsonValue]:
    out: list[JsonValue] = []
    for flat in _indexed(attrs, prefix):
        message: dict[str, JsonValue] = {
            "role": flat.get("message.role"),
            "content": flat.get("message.content"),
        }
        if flat.get("message.tool_call_id") is not None:
            message["tool_call_id"] = flat["message.tool_call_id"]
        calls = _indexed(flat, "message.tool_calls")
        if calls:
            message["tool_calls"] = [
                messages.wire_tool_call(
                    c.get("tool_call.id"),
                    c.get("tool_call.function.name"),
                    c.get("tool_call.function.arguments"),
                )
                for c in calls
            ]
        out.append(message)
    return out


def _params(attrs: Mapping[str, Any]) -> dict[str, JsonValue]:
    given = _json(attrs.get("llm.invocation_parameters"))
    if isinstance(given, dict):
        return given
    params: dict[str, JsonValue] = {}
    for name, key in PARAMS.items():
        if key in attrs and key not in {PARAMS[p] for p in params}:
            value = attrs[key]
            params[name] = value if not isinstance(value, tuple) else list(value)
    return params


def _tools(attrs: Mapping[str, Any]) -> list[JsonValue]:
    given = _json(attrs.get("gen_ai.tool.definitions"))
    if isinstance(given, list):
        return given
    return [_json(t.get("tool.json_schema")) for t in _indexed(attrs, "llm.tools")]


def _usage(attrs: Mapping[str, Any], api: llm.LLMApi) -> dict[str, JsonValue]:
    usage: dict[str, JsonValue] = {}
    for name, keys in zip(
        api.usage_keys,
        (
            ("gen_ai.usage.input_tokens", "llm.token_count.prompt"),
            ("gen_ai.usage.output_tokens", "llm.token_count.completion"),
        ),
        strict=False,
    ):
        value = next((attrs[k] for k in keys if isinstance(attrs.get(k), int)), None)
        if value is not None:
            usage[name] = value
    counts = [v for v in usage.values() if isinstance(v, int)]
    if len(api.usage_keys) > 2 and len(counts) == 2:
        usage[api.usage_keys[2]] = sum(counts)
    return usage


@dataclass(frozen=True)
class ModelCall:
    """A model call read from a span."""

    provider: str
    api: str
    url: str
    via: llm.LLMApi
    """The API the call is rebuilt as an exchange of: the first one of its provider."""
    call: llm.Imported


def model_call(span: SpanRecord) -> ModelCall:
    attrs = span.attributes
    provider = str(
        attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system") or attrs.get("llm.provider")
    )
    via = llm.for_provider(provider) or llm.apis()[0]
    provider = via.provider
    api = str(attrs.get("sandbox.llm.api") or via.name)
    model = str(attrs.get("gen_ai.request.model") or attrs.get("llm.model_name") or "")
    given_in = _json(attrs.get("gen_ai.input.messages"))
    wire_messages: list[JsonValue] = (
        messages.from_genai(given_in)
        if isinstance(given_in, list)
        else _openinference_wire(attrs, "llm.input_messages")
    )
    given_out = _json(attrs.get("gen_ai.output.messages"))
    if isinstance(given_out, list):
        response = messages.response_from_genai(given_out)
    else:
        out = _openinference_wire(attrs, "llm.output_messages")
        response = messages.response_from_genai(messages.to_genai(out))
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if response.get("stop_reason") is None and isinstance(reasons, list) and reasons:
        response["stop_reason"] = reasons[0]
    host, port = attrs.get("server.address"), attrs.get("server.port")
    origin = f"https://{host}{f':{port}' if port else ''}" if isinstance(host, str) else None
    url = str(attrs.get("url.full") or via.imported_url(model, origin))
    imported = llm.Imported(
        model=model,
        messages=wire_messages,
        params=_params(attrs),
        tools=_tools(attrs),
        answer=response,
        usage=_usage(attrs, via),
        response_id=str(attrs.get("gen_ai.response.id") or f"imported-{span.span_id}"),
        created=int(span.start),
    )
    return ModelCall(provider=provider, api=api, url=url, via=via, call=imported)


def pick_trace(spans: list[SpanRecord], trace_id: str | None) -> list[SpanRecord]:
    traces = sorted({s.trace_id for s in spans})
    if trace_id is None and len(traces) == 1:
        trace_id = traces[0]
    if trace_id is None:
        raise OTelImportError(
            f"the file holds {len(traces)} traces ({', '.join(traces[:5])}): name one"
        )
    chosen = [s for s in spans if s.trace_id == trace_id]
    if not chosen:
        raise OTelImportError(f"no trace {trace_id} in the file; it has {', '.join(traces[:5])}")
    return chosen


class _Events:
    """Builds the event log in completion order, allocating seqs and boundary spans."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.events: list[Event] = []
        self.next_span = 0

    def add(self, cls: type[Any], end: float, **fields: Any) -> Event:
        event: Event = cls(
            seq=len(self.events), wall=end, mono=max(0.0, end - self.origin), **fields
        )
        self.events.append(event)
        return event

    def span(self) -> int:
        self.next_span += 1
        return self.next_span - 1


def _boundaries(root: SpanRecord | None, spans: list[SpanRecord], log: _Events) -> list[ModelCall]:
    calls: list[ModelCall] = []
    boundary = [s for s in spans if s is not root and _kind(s) is not None]
    for s in sorted(boundary, key=lambda s: (s.end, s.start)):
        task = str(s.attributes.get("sandbox.task") or "main")
        duration = max(0.0, s.end - s.start)
        if _kind(s) == "llm":
            call = model_call(s)
            calls.append(call)
            http_span = log.span()
            body = call.via.imported_response(call.call)
            request = call.via.imported_request(call.call)
            sent = call.via.parse_request(call.url, request)  # as replay reads the live call
            log.add(
                HTTPExchange,
                s.end,
                task=task,
                name=f"POST {call.url}",
                span=http_span,
                method="POST",
                url=call.url,
                request_headers={"content-type": "application/json"},
                request_body=request,
                status=200 if s.error is None else None,
                response_headers={"content-type": "application/json"},
                response_body=body if s.error is None else None,
                error=s.error,
                duration=duration,
            )
            log.add(
                LLMCall,
                s.end,
                task=task,
                name=call.call.model,
                span=log.span(),
                parent_span=http_span,
                provider=call.provider,
                model=call.call.model,
                messages=sent.messages,
                params=sent.params,
                tools=sent.tools,
                response=call.call.answer if s.error is None else None,
                usage=call.call.usage,
                provider_meta={
                    "api": call.api,
                    "id": call.call.response_id,
                    "model": call.call.model,
                },
                error=s.error,
                duration=duration,
            )
        else:
            attrs = s.attributes
            name = str(attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or s.name)
            args = _json(attrs.get("gen_ai.tool.call.arguments") or attrs.get("input.value"), {})
            output = attrs.get("gen_ai.tool.call.result", attrs.get("output.value"))
            log.add(
                ToolCall,
                s.end,
                task=task,
                name=name,
                span=log.span(),
                args=args if isinstance(args, dict) else {"input": args},
                output=None if s.error else _json(output),
                error=s.error,
                started=max(0.0, s.start - log.origin),
                duration=duration,
            )
    return calls


def _failure(root: SpanRecord | None, predicate: Predicate | None) -> Failure | None:
    if predicate is not None:
        return Failure(predicate=predicate, reason="given at import")
    given = root.attributes.get("sandbox.failure") if root is not None else None
    if isinstance(given, str):
        try:
            return Failure.model_validate_json(given)
        except ValidationError as exc:
            raise OTelImportError(
                f"sandbox.failure of the root span: {exc.errors()[0]['msg']}"
            ) from None
    if root is not None and root.error is not None:
        return Failure(reason="the root span ended in an error", error=root.error)
    return None


def _name(root: SpanRecord | None) -> str:
    """The run's name: the one exported, the agent's (``gen_ai.agent.name``), the root span's."""
    if root is None:
        return "otel"
    attrs = root.attributes
    return str(attrs.get("sandbox.name") or attrs.get("gen_ai.agent.name") or root.name)


def _run_id(root: SpanRecord | None, trace_id: str, run_id: str | None) -> str:
    if run_id is not None:
        return check_run_id(run_id)
    given = root.attributes.get("sandbox.run_id") if root is not None else None
    if isinstance(given, str) and re.match(RUN_ID_PATTERN, given):
        return f"{given}-otel"[:128]
    return f"otel-{trace_id[:16] or 'trace'}"


def snapshot_from_spans(
    spans: list[SpanRecord],
    *,
    run_id: str | None = None,
    entrypoint: str | None = None,
    predicate: Predicate | None = None,
) -> Snapshot:
    """A run of the store from the spans of one trace."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    root = min(roots, key=lambda s: s.start) if roots else None
    begin = min(s.start for s in spans)
    end = max(s.end for s in spans)
    log = _Events(begin)
    calls = _boundaries(root, spans, log)
    if root is not None and (root.error is not None or "output.value" in root.attributes):
        log.add(
            FinalResult,
            end,
            name="result",  # as capture names it: a replay's result is the same step
            value=None if root.error else _json(root.attributes.get("output.value")),
            error=root.error,
        )
    started = datetime.fromtimestamp(begin, UTC)
    target = entrypoint or (root.attributes.get("sandbox.entrypoint") if root else None)
    models = {(c.provider, c.call.model): c.call.params for c in calls}
    try:
        manifest = Manifest(
            run_id=_run_id(root, spans[0].trace_id, run_id),
            name=_name(root),
            created=started,
            status="complete",
            entrypoint=Entrypoint(kind="callable", target=str(target)) if target else None,
            models=[ModelInfo(provider=p, model=m, params=v) for (p, m), v in models.items()],
            clock=Clock(start=started),
            seeds={"run": IMPORT_SEED},
            failure=_failure(root, predicate),
            labels={SOURCE_LABEL: SOURCE, "otel.trace_id": spans[0].trace_id},
        )
    except ValidationError as exc:
        raise OTelImportError(f"cannot make a run of the trace: {exc.errors()[0]['msg']}") from None
    return Snapshot(manifest, log.events)


def import_otlp_json(
    store: Store,
    path: str | Path,
    *,
    run_id: str | None = None,
    trace_id: str | None = None,
    entrypoint: str | None = None,
    predicate: Predicate | None = None,
    force: bool = False,
) -> Snapshot:
    """Read an OTLP/JSON file and save its trace as a run of ``store``."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise OTelImportError(f"cannot read {path}: {exc.strerror}") from None
    spans = pick_trace(read_spans(data), trace_id)
    snapshot = snapshot_from_spans(spans, run_id=run_id, entrypoint=entrypoint, predicate=predicate)
    store.save(snapshot, overwrite=force)
    return snapshot


def imported_from(manifest: Manifest) -> str | None:
    """What a run was imported from (``opentelemetry``), or ``None`` for a captured run."""
    return manifest.labels.get(SOURCE_LABEL)
