"""OpenTelemetry out and in: a run as OTLP traces (GenAI and OpenInference attributes), and an
OTLP/JSON trace as a run that replays with every boundary served from the trace."""

from sandbox.otel.export import build_spans, otlp_json, send_otlp, write_otlp_json
from sandbox.otel.importer import import_otlp_json, imported_from

__all__ = [
    "build_spans",
    "import_otlp_json",
    "imported_from",
    "otlp_json",
    "send_otlp",
    "write_otlp_json",
]
