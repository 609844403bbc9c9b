"""The service-kind extension point: capture, restore, hash and describe one kind of
tool-side state.

Everything a kind needs lives with it (:mod:`sandbox.services.descriptor`). A service kind
works on an *endpoint*: a URL for a server (``postgresql://user@host:port/db``,
``redis://host:port/0``) or a filesystem path (a SQLite file, a workspace folder). It never
starts containers itself; ``sandbox.containers`` starts them and hands endpoints over.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from pydantic import JsonValue

from sandbox.services.descriptor import ContainerSpec, KindBinding

DESCRIBE_LIMIT = 1000
"""Items a description holds per table, per Redis database or per folder (see
:meth:`ServiceKind.describe`); beyond it the description is cut and says so."""
TRUNCATED = "truncated"
"""Key of a description listing what was cut: ``{"<table or 'keys' or 'files'>": total}``."""


TIMEZONE_META = "timezone"
"""Key of a capture's meta naming the time zone its server ran in (Postgres' ``TimeZone``):
a sandbox runs the service's container in that zone, whatever the agent's; a capture that
records none runs in UTC."""


@dataclass(frozen=True)
class CapturedState:
    """One capture of a service: the dump bytes (stored as a blob), a hash of the logical
    state, the server version when there is one, and kind-specific metadata."""

    data: bytes
    state_hash: str
    version: str | None = None
    media_type: str = "application/octet-stream"
    meta: dict[str, JsonValue] = field(default_factory=dict)


class ServiceKind(Protocol):
    """What every service kind offers: its state operations, how an agent finds it, and for
    a server how it runs in a container. Implementations register with :func:`register`."""

    name: ClassVar[str]
    binding: ClassVar[KindBinding]
    """How an agent usually finds a service of this kind (a variable, or a path)."""
    container: ClassVar[ContainerSpec | None]
    """How the server runs in a sandbox container; ``None`` for a kind on a path."""

    def capture(self, endpoint: str) -> CapturedState:
        """Dump the whole state behind ``endpoint``."""
        ...

    def restore(self, endpoint: str, data: bytes) -> None:
        """Replace the state behind ``endpoint`` with a dump made by :meth:`capture`."""
        ...

    def state_hash(self, endpoint: str) -> str:
        """A hash of the logical state: equal states give equal hashes, whatever the dump."""
        ...

    def mark_restore_point(self, endpoint: str) -> None:
        """Remember the current state so that :meth:`reset` can return to it quickly."""
        ...

    def reset(self, endpoint: str) -> None:
        """Return to the state saved by :meth:`mark_restore_point`, without a restart."""
        ...

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """The logical state as small, comparable JSON (rows, keys, files in a stable order),
        at most ``limit`` items per table, database or folder; what was cut is listed under
        :data:`TRUNCATED`. Two equal states give equal descriptions."""
        ...

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """The :meth:`describe` of a dump made by :meth:`capture`, restored for the purpose
        into a scratch target beside ``endpoint`` (never ``endpoint`` itself) that is removed
        afterwards."""
        ...


@runtime_checkable
class ServerFileLoad(Protocol):
    """A kind whose server can load a capture from a file in its container (Redis: an RDB),
    faster than :meth:`ServiceKind.restore` through a connection."""

    def server_file(self, data: bytes) -> bytes | None:
        """The file to place for the server, or ``None`` when this capture has none."""
        ...

    def load_server_file(self, endpoint: str, data: bytes) -> bool:
        """Load the placed file as the state and restore point (no :meth:`ServiceKind.restore`
        needed); ``False`` when it cannot be, nothing done."""
        ...


@runtime_checkable
class CreatedByClient(Protocol):
    """A kind whose client creates the service where it is missing (SQLite:
    ``sqlite3.connect`` makes the file): the capture before the client's first connection
    creates it as the client would, so that the state before the run is the empty one."""

    def create_missing(self, endpoint: str) -> None:
        """Create the service behind ``endpoint`` if there is none (never failing: the
        client's own connection creates it anyway)."""
        ...


class PinnedState(Protocol):
    """A service's state before a run, held until the run ends (see :class:`TouchedCapture`)."""

    def finish(self) -> tuple[CapturedState, CapturedState]:
        """The state before the run and the end state, each holding only what the run
        touched (their meta says which); the hold is released."""
        ...

    def close(self) -> None:
        """Release the hold without capturing."""
        ...


@runtime_checkable
class RunBound(Protocol):
    """A :class:`PinnedState` that observes the run serving a context (Redis: the commands
    it sends; Postgres: the statements): made before the run serves its context (a declared
    service), it is bound once it does, and unbound when the run ends."""

    def bind(self) -> None:
        """Observe the run serving the current context from now on."""
        ...

    def unbind(self) -> None:
        """The run is over: observe nothing more (what is kept stays held until
        :meth:`PinnedState.finish` or :meth:`PinnedState.close`)."""
        ...


def run_bound(pinned: object) -> RunBound | None:
    """``pinned`` when it is a :class:`RunBound` (a run asks at its start and its end)."""
    return cast(RunBound, pinned) if provides(pinned, RunBound) else None


_PROVIDED: dict[tuple[type, type], bool] = {}


def provides(value: object, protocol: type) -> bool:
    """``isinstance(value, protocol)`` for a runtime-checkable protocol whose members are
    all methods, told once for each class (a protocol's ``isinstance`` walks its members
    each time it is asked)."""
    key = (type(value), protocol)
    found = _PROVIDED.get(key)
    if found is None:
        found = _PROVIDED[key] = isinstance(value, protocol)
    return found


@runtime_checkable
class TouchedCapture(Protocol):
    """A kind that can capture only the part of its state a run touched (Postgres: the rows
    of the tables it read or wrote, see :mod:`sandbox.services.postgres.pgtouched`)."""

    def pin(self, endpoint: str) -> PinnedState:
        """Hold the state behind ``endpoint`` as it is before the run."""
        ...

    def outside_capture(self, endpoint: str, captured: Collection[str]) -> list[str]:
        """What a replayed run reached outside ``captured`` (the manifest's list), each
        described (``"read table public.x, whose rows were not captured"``)."""
        ...

    def captured_parts(self, meta: Mapping[str, Any]) -> list[str] | None:
        """What a partial capture holds, read from its manifest meta (the list
        :meth:`outside_capture` takes); ``None`` for a capture of the whole state."""
        ...

    def describe_capture(self, meta: Mapping[str, Any]) -> str | None:
        """How the state was captured, in a phrase starting ``partial`` or ``whole``
        (``"partial: rows of 2 of 5 tables (...)"``); ``None`` for a plain whole capture."""
        ...


@runtime_checkable
class UsedState(Protocol):
    """A kind that tells what of its restored state a replayed run read or wrote, for the
    run's coverage (:mod:`sandbox.replay.judging.coverage`): Postgres, from the tables'
    statistics counters (a statement that failed, or one on the catalogs, moves none)."""

    def used_since_restore(self, endpoint: str) -> list[str]:
        """What the run read or wrote since the state was restored, described (``"read
        table public.users"``), its sessions ended first; before anything else reads it."""
        ...


@runtime_checkable
class SQLQuery(Protocol):
    """A kind that answers SQL, for the invariants of a failure predicate
    (:class:`~sandbox.snapshot.manifest.SQLInvariant`), each with its own driver and always
    confined: one statement that only reads (:func:`sandbox.services.sqlquery.read_statement`),
    in a read-only transaction, within :data:`~sandbox.services.sqlquery.TIMEOUT_S`; an
    error is a :class:`~sandbox.errors.ServiceError` (a statement refused, or one that
    tried to write: :class:`~sandbox.errors.QueryRefusedError`)."""

    def query(
        self, endpoint: str, text: str, *, limit: int, sandboxed: bool
    ) -> list[tuple[Any, ...]]:
        """The first ``limit`` rows ``text`` returns at ``endpoint``. ``sandboxed``: the
        endpoint is a sandbox's own service, where the kind may confine the query further
        (Postgres: an unprivileged role it makes there); otherwise it is a live service,
        changed in nothing."""
        ...


def capture_note(kind: ServiceKind | None, meta: Mapping[str, Any]) -> str | None:
    """:meth:`TouchedCapture.describe_capture` of a kind that has it, else ``None``."""
    return kind.describe_capture(meta) if isinstance(kind, TouchedCapture) else None


@runtime_checkable
class StateParts(Protocol):
    """A kind whose state is made of parts a what-if trial can remove (a table's rows, a key,
    a file: see :mod:`sandbox.explain.parts`)."""

    part_label: ClassVar[str]
    """What a part's label starts with (``"table "``), before its name."""

    def parts(self, description: Mapping[str, Any]) -> list[str]:
        """The labels of the parts a :meth:`ServiceKind.describe` lists."""
        ...

    def remove_parts(self, endpoint: str, names: Sequence[str]) -> None:
        """Remove the named parts (labels without :attr:`part_label`) from the state behind
        ``endpoint``, as one change where the kind can."""
        ...


def table_parts(description: Mapping[str, Any]) -> list[str]:
    """The tables with rows of a description of tables (``{"tables": {name: [row ...]}}``)."""
    tables = description.get("tables")
    if not isinstance(tables, dict):
        return []
    return [f"table {name}" for name, rows in tables.items() if rows]


_KINDS: dict[str, ServiceKind] = {}


def register(kind: ServiceKind) -> ServiceKind:
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a registered kind (a plugin's or a test's; nothing if it is not registered)."""
    _KINDS.pop(name, None)


def registered() -> Mapping[str, ServiceKind]:
    """The kinds registered so far. Look kinds up with :func:`sandbox.services.registry.get_kind`,
    which registers the built-in ones first."""
    return _KINDS
