"""The manifest: what a run was, where it ran, and what its environment looked like."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue

from sandbox.names import FAILURE_EVENT
from sandbox.snapshot.events import (
    SHA256_PATTERN,
    BlobRef,
    ErrorInfo,
    Event,
    StateTransition,
    Strict,
)

SCHEMA_VERSION = 1
"""Version of the manifest, event and bundle formats this build writes and reads."""

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


def _empty(value: object) -> bool:
    return not value


class Entrypoint(Strict):
    """What ran: a command line, or a ``module:function`` called in-process."""

    kind: Literal["command", "callable"]
    command: list[str] = []
    target: str | None = None
    cwd: str | None = None
    args: list[JsonValue] = Field(default=[], exclude_if=_empty)
    """A callable's positional arguments (a call of a function decorated with
    ``capture.run`` whose arguments are all JSON: a task's); replay passes them again.
    Left out of the manifest when there are none."""
    kwargs: dict[str, JsonValue] = Field(default={}, exclude_if=_empty)
    """Its keyword arguments, likewise."""


class CodeVersion(Strict):
    commit: str | None = None
    dirty: bool = False
    diff: BlobRef | None = None


class Runtime(Strict):
    python: str
    platform: str
    packages: dict[str, str] = {}


class ModelInfo(Strict):
    provider: str
    model: str
    params: dict[str, JsonValue] = {}


class Clock(Strict):
    start: datetime
    """Wall time when the run started (timezone-aware)."""
    timezone: str = "UTC"


class Binding(Strict):
    """How the agent finds a service: an environment variable or a path."""

    env: str | None = None
    value: str | None = None
    """The value seen at capture (redacted where it carried a secret)."""


class ServiceState(Strict):
    name: str
    kind: str
    binding: Binding = Binding()
    version: str | None = None
    image: str | None = None
    before: BlobRef | None = None
    """State at the restore point (before the run)."""
    after: BlobRef | None = None
    """End state (after the run), compared against on replay."""
    hash_before: str | None = None
    hash_after: str | None = None
    meta: dict[str, JsonValue] = {}


class TouchedService(Strict):
    """A service the agent connected to during the run, as seen at its client."""

    kind: str
    endpoint: str
    """URL (credentials redacted) or path, as the agent asked for it."""
    clients: list[str] = []
    """Client libraries that connected (``psycopg``, ``redis``, ``sqlite3`` ...)."""
    service: str | None = None
    """Name of the captured service (in ``services``) that stands for it; ``None`` when its
    state was not captured: on replay a connection to it is refused."""


class ExceptionPredicate(Strict):
    """The failure is an exception of this type (and message) ending the run."""

    kind: Literal["exception"] = "exception"
    type: str
    message_contains: str | None = None


class SQLInvariant(Strict):
    """The failure is present when this query returns at least one row."""

    kind: Literal["sql"] = "sql"
    service: str
    query: str


class ResultPredicate(Strict):
    """The failure is present when the final result at ``path`` compares true to ``value``."""

    kind: Literal["result"] = "result"
    path: str = ""
    op: Literal["eq", "ne", "contains", "not_contains", "gt", "lt"] = "eq"
    value: JsonValue = None


class ExitCodePredicate(Strict):
    """The failure is present when the run's exit code compares true to ``value`` (a function
    run in-process exits 0 when it returns, 1 when an exception ends it)."""

    kind: Literal["exit"] = "exit"
    op: Literal["eq", "ne", "gt", "lt"] = "ne"
    value: int = 0


class MarkedPredicate(Strict):
    """The failure is present when the run marks itself failed (``capture.mark_failed``),
    with a reason that contains ``reason_contains`` when one is given: how a run marked
    failed without a predicate of its own is judged."""

    kind: Literal["marked"] = "marked"
    reason_contains: str | None = None


Predicate = Annotated[
    ExceptionPredicate | SQLInvariant | ResultPredicate | ExitCodePredicate | MarkedPredicate,
    Field(discriminator="kind"),
]


class Failure(Strict):
    observed: bool = True
    reason: str = ""
    predicate: Predicate | None = None
    error: ErrorInfo | None = None


def marked_failure(events: Sequence[Event]) -> Failure | None:
    """The last failure a log marked (``capture.mark_failed``: its ``state`` event), if any."""
    for event in reversed(events):
        if isinstance(event, StateTransition) and event.name == FAILURE_EVENT:
            return Failure.model_validate(event.data["failure"])
    return None


class Provenance(Strict):
    """Where a run came from when it was not captured in this store: ``sandbox import`` sets
    it (whatever the bundle said), and a run that has it is someone else's data."""

    imported_from: str
    """File name of the bundle it was imported from."""
    bundle_sha256: Annotated[str, Field(pattern=SHA256_PATTERN)]


class FixMark(Strict):
    """A captured failure said to be fixed (``sandbox mark RUN --fixed``): from then on its
    replay is expected to be gone, and a reproduction is a regression."""

    at: datetime
    by: str | None = None
    """What fixed it, as the user named it (a commit, a ticket)."""


class ForkOverride(Strict):
    """One recorded response replaced in a fork: the step (event ``seq``) and what it
    answers with instead (an assistant message or a provider response, a tool output, a
    list of documents, an HTTP body)."""

    step: Annotated[int, Field(ge=0)]
    value: JsonValue = None


class ForkEdits(Strict):
    """How a fork departs from its parent (``replay_of``): the step from which it runs live,
    the responses it replaced, and the model and parameters of its live model calls."""

    until: Annotated[int, Field(ge=0)] | None = None
    """The first step (event ``seq`` of the parent) served live; ``None``: just after the
    last override, or from the start when only the model or its parameters change."""
    overrides: list[ForkOverride] = []
    model: str | None = None
    params: dict[str, JsonValue] = {}


def _unset(value: object) -> bool:
    """``fixed`` and ``tags`` are written only when set: a manifest that uses neither is
    byte for byte what earlier versions wrote, and they read it."""
    return not value


class Manifest(Strict):
    schema_version: int = SCHEMA_VERSION
    run_id: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    name: str = ""
    created: datetime
    status: Literal["running", "complete", "damaged"] = "running"
    """``running`` until the capture finishes; a run left ``running`` by a dead process is
    incomplete; ``damaged``: the capture itself failed (the label ``sandbox.damage`` says
    why) and the run is not a complete recording."""
    pid: int | None = None
    host: str | None = None
    entrypoint: Entrypoint | None = None
    code: CodeVersion = CodeVersion()
    runtime: Runtime | None = None
    env: dict[str, str] = {}
    models: list[ModelInfo] = []
    clock: Clock | None = None
    seeds: dict[str, int] = {}
    services: list[ServiceState] = []
    touched: list[TouchedService] = []
    """Services the agent connected to (found at the clients), captured or not."""
    failure: Failure | None = None
    exit_code: int | None = None
    event_count: int | None = None
    """Number of events, written when the capture finishes."""
    blob_bytes: int | None = None
    """Bytes of the distinct blobs the run references (manifest and events), written when
    the run is sealed, so that a listing shows a run's size without reading its log."""
    events_sha256: Annotated[str, Field(pattern=SHA256_PATTERN)] | None = None
    """SHA-256 of ``events.jsonl`` as finished: a flipped byte in the log is detected."""
    replay_of: str | None = None
    fork: ForkEdits | None = None
    """Set on a fork (``sandbox replay --until/--override/--model/--param``): its edits;
    ``replay_of`` names its parent."""
    provenance: Provenance | None = None
    """Set on runs brought in by ``sandbox import`` (untrusted); ``None`` for local captures."""
    labels: dict[str, str] = {}
    fixed: Annotated[FixMark | None, Field(exclude_if=_unset)] = None
    """Set when the failure was marked fixed: ``ci-repro`` then expects it gone."""
    tags: Annotated[list[str], Field(exclude_if=_unset)] = []
    """Names given to this run (``sandbox tag RUN TAG``); a tag names one run of a store."""


def manifest_json_schema() -> dict[str, Any]:
    return Manifest.model_json_schema()
