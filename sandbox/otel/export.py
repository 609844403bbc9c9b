"""A run as OpenTelemetry traces: built with the SDK, sent with its OTLP/HTTP exporter or
written as OTLP/JSON.

One trace per run. The root span is the run: the GenAI conventions' ``invoke_agent {name}``
(OpenInference kind ``AGENT``), the final result as its output, the failure in
``sandbox.failure``; a failed run's root span ends with status ``ERROR``, the failure as its
message and an ``exception`` event (the recorded exception, or :data:`FAILURE_EXCEPTION` for
a failure a predicate observed). A concurrent task other than ``main`` gets a ``CHAIN`` span
of its own; every event is a span under the span of the boundary call that enclosed it, or
else under its task's span, ``ERROR`` when the step failed (an exception, a timeout). A
model call's HTTP exchange is folded into the model call's span (the conventions' ``chat
{model}`` span), so each call shows once. A random draw is no span: it is a ``sandbox.random``
span event of the step (or run) it happened in. Span times come from the recorded wall
times (an event's start is its end less its duration).

Trace and span ids are derived from the run id and the event's sequence number, so exporting
a run twice gives the same ids, and a replay links to the root span of its original
(``manifest.replay_of``) without loading it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from sandbox.errors import OTelError
from sandbox.otel.attributes import (
    OPERATION,
    SPAN_KIND,
    Attributes,
    as_json,
    event_attributes,
    llm_attributes,
    span_name,
)
from sandbox.snapshot.events import (
    ErrorInfo,
    Event,
    FinalResult,
    HTTPExchange,
    LLMCall,
    RandomDraw,
    Timeout,
)
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.store import atomic_write

SERVICE_NAME = "sandbox-replayer"
PROJECT_ATTRIBUTE = "openinference.project.name"
TRACES_PATH = "/v1/traces"
_ROOT = "root"
FAILURE_EXCEPTION = "sandbox.failure"
"""``exception.type`` of the root span's exception event when the run's failure was observed
by a predicate, not raised (the importer knows it is no exception of the agent's)."""
RANDOM_EVENT = "sandbox.random"


def trace_id_of(run_id: str) -> int:
    """The trace id of a run's export (128 bits from its id)."""
    return int(hashlib.sha256(f"trace:{run_id}".encode()).hexdigest()[:32], 16) or 1


def span_id_of(run_id: str, key: str) -> int:
    """The span id of one span of a run's export: ``root``, ``task:NAME`` or ``seq:N``."""
    return int(hashlib.sha256(f"span:{run_id}:{key}".encode()).hexdigest()[:16], 16) or 1


class _FixedIds(IdGenerator):
    """Hands out the ids chosen for the next span (the SDK asks when a span starts)."""

    def __init__(self, trace_id: int) -> None:
        self.trace_id = trace_id
        self.next_span_id = 0

    def generate_span_id(self) -> int:
        return self.next_span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


@dataclass(frozen=True)
class _SpanSpec:
    key: str
    parent: str | None
    name: str
    start: float
    end: float
    attributes: Attributes
    error: ErrorInfo | None = None
    status: str | None = None
    """The ``ERROR`` status message when it is not the error's own text."""
    events: tuple[tuple[str, Attributes, float], ...] = ()
    """Span events: name, attributes, time."""


def _draw_event(event: RandomDraw) -> tuple[str, Attributes, float]:
    attributes: Attributes = {
        "sandbox.seq": event.seq,
        "sandbox.random.source": event.source,
        "sandbox.task": event.task,
    }
    if event.seed is not None:
        attributes["sandbox.random.seed"] = event.seed
    if event.value is not None:
        attributes["sandbox.random.value"] = as_json(event.value)
    return (RANDOM_EVENT, attributes, event.wall)


def _step_error(event: Event) -> ErrorInfo | None:
    if isinstance(event, Timeout):
        return ErrorInfo(type="TimeoutError", message=f"timed out after {event.after:.3g} s")
    error = getattr(event, "error", None)
    return error if isinstance(error, ErrorInfo) else None


def _duration(event: Event) -> float:
    return float(getattr(event, "duration", 0.0) or 0.0)


def _folded_exchanges(events: Sequence[Event]) -> dict[int, tuple[HTTPExchange, LLMCall]]:
    """HTTP exchanges that carried a model call, by their span: the exchange and the call."""
    exchanges = {e.span: e for e in events if isinstance(e, HTTPExchange) and e.span is not None}
    return {
        e.parent_span: (exchanges[e.parent_span], e)
        for e in events
        if isinstance(e, LLMCall) and e.parent_span in exchanges
    }


def _task_key(task: str) -> str:
    return _ROOT if task == "main" else f"task:{task}"


def _event_specs(
    events: Sequence[Event],
) -> tuple[list[_SpanSpec], dict[str, list[tuple[str, Attributes, float]]]]:
    """The events' spans, and the random draws as span events by the key of their span."""
    folded = _folded_exchanges(events)
    parent_of = {e.span: e.parent_span for e in events if e.span is not None}
    by_span = {
        e.span: f"seq:{e.seq}"
        for e in events
        if e.span is not None and not isinstance(e, RandomDraw)
    }
    by_span.update({span: f"seq:{call.seq}" for span, (_, call) in folded.items()})

    def parent_key(event: Event, enclosing: int | None) -> str:
        seen: set[int] = set()
        while enclosing is not None and enclosing not in by_span and enclosing not in seen:
            seen.add(enclosing)  # a draw's span encloses nothing of its own: go up
            enclosing = parent_of.get(enclosing)
        found = by_span.get(enclosing) if enclosing is not None else None
        return found or _task_key(event.task)

    specs: list[_SpanSpec] = []
    draws: dict[str, list[tuple[str, Attributes, float]]] = {}
    for e in events:
        if isinstance(e, FinalResult) or (isinstance(e, HTTPExchange) and e.span in folded):
            continue
        if isinstance(e, RandomDraw):
            draws.setdefault(parent_key(e, e.parent_span), []).append(_draw_event(e))
            continue
        enclosing = e.parent_span
        attributes = event_attributes(e)
        if isinstance(e, LLMCall) and enclosing in folded:
            exchange = folded[enclosing][0]
            enclosing = exchange.parent_span
            attributes["url.full"] = exchange.url
        parent = parent_key(e, enclosing)
        specs.append(
            _SpanSpec(
                key=f"seq:{e.seq}",
                parent=parent or _task_key(e.task),
                name=span_name(e),
                start=e.wall - _duration(e),
                end=e.wall,
                attributes=attributes,
                error=_step_error(e),
            )
        )
    return specs, draws


def _root_spec(manifest: Manifest, events: Sequence[Event], start: float, end: float) -> _SpanSpec:
    name = manifest.name or manifest.run_id
    attributes: Attributes = {
        SPAN_KIND: "AGENT",
        OPERATION: "invoke_agent",
        "gen_ai.agent.name": name,
        "sandbox.run_id": manifest.run_id,
        "sandbox.name": manifest.name,
    }
    entry = manifest.entrypoint
    if entry is not None and entry.kind == "callable" and entry.target:
        attributes["sandbox.entrypoint"] = entry.target
    if manifest.failure is not None:
        attributes["sandbox.failure"] = manifest.failure.model_dump_json()
    if manifest.replay_of:
        attributes["sandbox.replay_of"] = manifest.replay_of
    calls = [e for e in events if isinstance(e, LLMCall)]
    if calls:  # what the agent was asked (its first model call's input) and last answered
        asked = llm_attributes(calls[0])["gen_ai.input.messages"]
        attributes["gen_ai.input.messages"] = attributes["input.value"] = asked
        attributes["input.mime_type"] = "application/json"
        attributes["gen_ai.output.messages"] = llm_attributes(calls[-1])["gen_ai.output.messages"]
    final = next((e for e in reversed(events) if isinstance(e, FinalResult)), None)
    if final is not None and final.error is None:
        attributes["output.value"] = as_json(final.value)
        attributes["output.mime_type"] = "application/json"
    error = final.error if final is not None else None
    status = None
    failure = manifest.failure
    if failure is not None and failure.observed:
        status = failure.reason or (
            f"{failure.error.type}: {failure.error.message}" if failure.error else "failed"
        )
        if error is None:
            error = failure.error or ErrorInfo(type=FAILURE_EXCEPTION, message=status)
    return _SpanSpec(_ROOT, None, f"invoke_agent {name}", start, end, attributes, error, status)


def span_specs(snapshot: Snapshot) -> list[_SpanSpec]:
    """Every span of a run's trace, the root first."""
    manifest, events = snapshot.manifest, snapshot.events
    specs, draws = _event_specs(events)
    begin = manifest.clock.start.timestamp() if manifest.clock else manifest.created.timestamp()
    start = min([begin, *(s.start for s in specs)])
    end = max([start, *(e.wall for e in events)])
    tasks: list[_SpanSpec] = []
    for task in sorted({e.task for e in events} - {"main"}):
        own = [s for s in specs if s.parent == _task_key(task)]
        first = min((s.start for s in own), default=start)
        last = max((s.end for s in own), default=first)
        attributes: Attributes = {SPAN_KIND: "CHAIN", "sandbox.task": task}
        tasks.append(_SpanSpec(_task_key(task), _ROOT, f"task {task}", first, last, attributes))
    every = [_root_spec(manifest, events, start, end), *tasks, *specs]
    return [replace(s, events=tuple(draws.get(s.key, ()))) if s.key in draws else s for s in every]


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def build_spans(snapshot: Snapshot, *, project: str | None = None) -> list[ReadableSpan]:
    """The run's spans, finished, as the SDK's exporters take them."""
    run_id = snapshot.run_id
    ids = _FixedIds(trace_id_of(run_id))
    resource: dict[str, Any] = {"service.name": SERVICE_NAME}
    if project:
        resource[PROJECT_ATTRIBUTE] = project
    provider = TracerProvider(resource=Resource.create(resource), id_generator=ids)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("sandbox.otel")
    links: list[Link] = []
    if snapshot.manifest.replay_of:
        original = snapshot.manifest.replay_of
        links.append(
            Link(
                SpanContext(
                    trace_id_of(original),
                    span_id_of(original, _ROOT),
                    is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                ),
                {"sandbox.link": "replay_of", "sandbox.run_id": original},
            )
        )
    for spec in span_specs(snapshot):
        context = None
        if spec.parent is not None:
            parent = SpanContext(
                ids.trace_id,
                span_id_of(run_id, spec.parent),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        ids.next_span_id = span_id_of(run_id, spec.key)
        span = tracer.start_span(
            spec.name,
            context=context,
            kind=SpanKind.CLIENT if spec.attributes.get(SPAN_KIND) == "LLM" else SpanKind.INTERNAL,
            attributes=spec.attributes,
            links=links if spec.key == _ROOT else (),
            start_time=_ns(spec.start),
        )
        for name, attributes, at in spec.events:
            span.add_event(name, attributes, timestamp=_ns(at))
        if spec.error is not None:
            span.add_event(
                "exception",
                {"exception.type": spec.error.type, "exception.message": spec.error.message},
                timestamp=_ns(spec.end),
            )
            message = spec.status or f"{spec.error.type}: {spec.error.message}"
            span.set_status(Status(StatusCode.ERROR, message))
        span.end(end_time=_ns(spec.end))
    provider.shutdown()
    return list(memory.get_finished_spans())


def _hex_ids(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping gives
    base64."""
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex()
            if k in {"traceId", "spanId", "parentSpanId"} and isinstance(v, str)
            else _hex_ids(v)
            for k, v in value.items()
        }
    return value


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (what a collector's file exporter writes):
    the SDK's protobuf encoding in protobuf's JSON mapping, with hex ids."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    body = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    result: dict[str, Any] = _hex_ids(body)
    return result


def write_otlp_json(snapshot: Snapshot, path: str | Path, *, project: str | None = None) -> Path:
    """Write a run's trace as OTLP/JSON (atomically)."""
    target = Path(path)
    data = json.dumps(otlp_json(build_spans(snapshot, project=project)), indent=1)
    atomic_write(target, data.encode() + b"\n")
    return target


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector: ``http://host:4318`` gets ``/v1/traces``."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def send_otlp(
    snapshot: Snapshot,
    endpoint: str,
    *,
    project: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """Send a run's trace to an OTLP/HTTP collector (protobuf); return the number of spans."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = build_spans(snapshot, project=project)
    url = traces_url(endpoint)
    exporter = OTLPSpanExporter(endpoint=url, headers=dict(headers or {}), timeout=timeout)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        raise OTelError(f"the OTLP collector at {url} did not accept the {len(spans)} spans")
    return len(spans)
