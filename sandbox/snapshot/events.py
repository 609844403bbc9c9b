"""The run log: one event per boundary where the next state could change.

Events are a discriminated union on ``kind``. Every event shares :class:`EventBase`; the
kind-specific fields follow. Values that are JSON (arguments, outputs) are kept as
:data:`JsonValue`; large payloads are stored as blobs and referenced by :class:`BlobRef`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

SHA256_PATTERN = r"^[0-9a-f]{64}$"


class Strict(BaseModel):
    """Base for every stored model: unknown fields are refused, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BlobRef(Strict):
    """A payload stored by content: its SHA-256, size and media type."""

    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)]
    size: Annotated[int, Field(ge=0)]
    media_type: str = "application/octet-stream"


class ErrorInfo(Strict):
    """An exception as data: its qualified type and message, and (when they are JSON) the
    arguments it was built with and its own attributes, so that replay can build it again."""

    type: str
    message: str
    args: list[JsonValue] | None = None
    """``exc.args``, when every one is JSON and they are not just the message."""
    attrs: dict[str, JsonValue] = Field(default_factory=dict)
    """The instance's own attributes that are JSON (a pydantic model as
    ``{"model": "module.QualName", "value": ...}``)."""


class EventBase(Strict):
    seq: Annotated[int, Field(ge=0)]
    """Position in the log, from 0, in the order events completed."""
    parent: int | None = None
    """``seq`` of the enclosing event (a tool call inside a retry, for example)."""
    task: str = "main"
    """Which task or thread emitted it: concurrency is replayed per task."""
    wall: float
    """Wall-clock time (seconds since the epoch) when the event completed."""
    mono: float
    """Monotonic seconds since the run started, when the event completed."""
    name: str = ""
    fingerprint: str | None = None
    """SHA-256 of the normalized request, for matching on replay."""
    attempt: Annotated[int, Field(ge=1)] | None = None
    span: Annotated[int, Field(ge=0)] | None = None
    """Id of the boundary call, allocated when it *began* (0, 1, 2 ... in start order).
    An enclosing call completes after what it encloses, so its ``seq`` is not known yet when
    a nested event is written: nesting is recorded with spans (``parent_span``)."""
    parent_span: int | None = None
    """``span`` of the enclosing boundary call, when there is one."""
    served: Literal["recorded", "live", "override"] | None = None
    """In a fork, how the crossing was served: from the recording, live, or with the
    response the fork put in its place (``None`` in captures and plain replays)."""


class LLMCall(EventBase):
    kind: Literal["llm"] = "llm"
    provider: str = ""
    model: str = ""
    template: str | None = None
    variables: dict[str, JsonValue] = {}
    messages: list[JsonValue] = []
    params: dict[str, JsonValue] = {}
    tools: list[JsonValue] = []
    response: JsonValue = None
    usage: dict[str, JsonValue] = {}
    provider_meta: dict[str, JsonValue] = {}
    streamed: bool = False
    error: ErrorInfo | None = None
    duration: float = 0.0


class MCPInfo(Strict):
    """Where an MCP request went: the server (its ``serverInfo.name``), the JSON-RPC method,
    and how the client reached it (``{"kind": "stdio", "command": [...]}`` or ``{"kind":
    "http", "url": ...}``; environment values and URL credentials are never kept)."""

    server: str
    method: str
    transport: dict[str, JsonValue] = {}


class ToolCall(EventBase):
    kind: Literal["tool"] = "tool"
    tool_schema: dict[str, JsonValue] = {}
    args: dict[str, JsonValue] = {}
    output: JsonValue = None
    output_blob: BlobRef | None = None
    error: ErrorInfo | None = None
    started: float = 0.0
    """Monotonic seconds since run start when the call began (start order of a race)."""
    duration: float = 0.0
    mcp: MCPInfo | None = None
    """Set when the call was an MCP request (``tools/call``, ``initialize`` ...)."""


class RetrievedDoc(Strict):
    id: str
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)]
    blob: BlobRef | None = None
    score: float | None = None
    metadata: dict[str, JsonValue] = {}


class Retrieval(EventBase):
    kind: Literal["retrieval"] = "retrieval"
    query: JsonValue = None
    documents: list[RetrievedDoc] = []
    error: ErrorInfo | None = None


class MemoryOp(EventBase):
    kind: Literal["memory"] = "memory"
    op: Literal["read", "write", "delete"]
    key: str
    value: JsonValue = None


class HTTPExchange(EventBase):
    kind: Literal["http"] = "http"
    method: str
    url: str
    request_headers: dict[str, str] = {}
    request_body: JsonValue = None
    request_blob: BlobRef | None = None
    status: int | None = None
    response_headers: dict[str, str] = {}
    response_body: JsonValue = None
    response_blob: BlobRef | None = None
    streamed: bool = False
    error: ErrorInfo | None = None
    duration: float = 0.0


class ClockRead(EventBase):
    kind: Literal["clock"] = "clock"
    value: float
    """The time handed out (seconds since the epoch)."""
    source: str = "time.time"


class RandomDraw(EventBase):
    kind: Literal["random"] = "random"
    source: str
    """What drew: ``random.seed``, ``numpy.seed``, ``uuid4`` ..."""
    seed: int | None = None
    value: JsonValue = None


class RetryAttempt(EventBase):
    kind: Literal["retry"] = "retry"
    outcome: Literal["success", "error"]
    error: ErrorInfo | None = None
    wait: float = 0.0
    """Seconds waited before the next attempt (0 when none follows)."""
    policy: dict[str, JsonValue] = {}


class Timeout(EventBase):
    kind: Literal["timeout"] = "timeout"
    after: float
    """Seconds the attempt ran before it timed out."""
    committed: bool | None = None
    """Whether the side effect had already happened (``None`` when not knowable)."""


class StateTransition(EventBase):
    kind: Literal["state"] = "state"
    source: str | None = None
    target: str
    data: dict[str, JsonValue] = {}


class FinalResult(EventBase):
    kind: Literal["result"] = "result"
    value: JsonValue = None
    error: ErrorInfo | None = None


Event = Annotated[
    LLMCall
    | ToolCall
    | Retrieval
    | MemoryOp
    | HTTPExchange
    | ClockRead
    | RandomDraw
    | RetryAttempt
    | Timeout
    | StateTransition
    | FinalResult,
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_KINDS: tuple[str, ...] = (
    "llm",
    "tool",
    "retrieval",
    "memory",
    "http",
    "clock",
    "random",
    "retry",
    "timeout",
    "state",
    "result",
)


def event_json_schema() -> dict[str, Any]:
    """JSON Schema of one line of ``events.jsonl``."""
    return EVENT_ADAPTER.json_schema()
