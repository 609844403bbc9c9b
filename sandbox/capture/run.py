"""``run(...)``: capture one agent run, as a context manager or a decorator (sync or async).

::

    with sandbox.capture.run("checkout", store="snapshots", seed=7) as rec:
        agent.run()
        rec.set_result(answer)

On entry: the run folder is created (manifest with status ``running``), the recorder is
installed as the process's boundary, ``random`` (and numpy) are seeded, ``uuid.uuid4`` is made
deterministic and the httpx transports are patched. On exit: pending events are written, the
services' end states are captured, the patches are undone, and the manifest is finished
(``complete``, failure, ``event_count``, ``events_sha256``). An exception escaping the block
marks the run failed with an :class:`ExceptionPredicate` and propagates unchanged.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sandbox.capture.children import follow_captured_children
from sandbox.capture.clients import endpoint_key
from sandbox.capture.clock import Clock, SystemClock, local_timezone, start_datetime
from sandbox.capture.discovery import (
    Discovery,
    ServicesMode,
    StateMode,
    check_mode,
    check_state_mode,
)
from sandbox.capture.entropy import patch_entropy
from sandbox.capture.environment import code_version, host, runtime
from sandbox.capture.envreads import track_env_reads
from sandbox.capture.frameworks import patch_frameworks
from sandbox.capture.http import patch_httpx
from sandbox.capture.ids import derive_seed, patch_uuid4, seed_generators
from sandbox.capture.mcp import patch_mcp
from sandbox.capture.recorder import BLOB_THRESHOLD, Recorder
from sandbox.capture.redact import RedactionConfig, Redactor
from sandbox.capture.retry import patch_tenacity
from sandbox.capture.scrub import redact_manifest, seal
from sandbox.errors import CaptureError
from sandbox.seam import boundary
from sandbox.snapshot.events import Event, LLMCall
from sandbox.snapshot.hashing import canonical_json, sha256_bytes
from sandbox.snapshot.manifest import Binding, Entrypoint, Manifest, ModelInfo, ServiceState
from sandbox.snapshot.manifest import Clock as ClockInfo
from sandbox.snapshot.store import (
    EVENTS,
    RunWriter,
    Store,
    as_store,
    parse_event,
    referenced_blob_bytes,
)

if TYPE_CHECKING:
    from sandbox.services.base import PinnedState

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ServiceSpec:
    """A service whose state is captured before and after the run."""

    name: str
    kind: str
    """A registered service kind (``postgres``, ``redis``, ``sqlite``, ``files`` ...)."""
    endpoint: str
    env: str | None = None
    """The environment variable through which the agent finds it (``DATABASE_URL``)."""
    mask: Mapping[str, str] = field(default_factory=dict)
    """Masking rules applied to what is captured, ``{TARGET: METHOD}``: ``"users.email":
    "hash"`` (see :mod:`sandbox.services.masking`)."""


def make_run_id(name: str, when: float) -> str:
    """``<name>-<UTC time>-<6 hex>``: sortable, unique, safe as a folder name."""
    import time

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:60] or "run"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    return f"{slug}-{stamp}-{secrets.token_hex(3)}"


def command_line() -> list[str]:
    """The command that started this process as typed (``python agent.py``, ``python -m
    pkg``, ``python -c ...``): replay runs it again."""
    return list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])


@dataclass
class Capture:
    """Settings of a capture; enter it (``with``/``async with``) or decorate a function.
    The settings after ``name`` are keywords."""

    name: str
    _: KW_ONLY
    store: Store | str | os.PathLike[str] | None = None
    services: Sequence[ServiceSpec] | str = "auto"
    """``"auto"`` (capture each service the agent connects to), ``"none"`` (record the
    endpoints only), or the declared services (the others found are recorded only); see
    :mod:`sandbox.capture.discovery`."""
    seed: int | None = None
    run_id: str | None = None
    redaction: RedactionConfig = field(default_factory=RedactionConfig)
    clock: Clock | None = None
    http: bool = True
    ids: bool = True
    environ: Mapping[str, str] | None = None
    cwd: str | None = None
    entrypoint: Entrypoint | None = None
    blob_threshold: int = BLOB_THRESHOLD
    packages: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    state: str = "whole"
    """How services are captured: ``"whole"``, or ``"touched"``: a Postgres database holds
    only the rows of the tables the run read or wrote, the schema of all (see
    :mod:`sandbox.services.postgres.pgtouched`)."""

    def __post_init__(self) -> None:
        self._recorder: Recorder | None = None
        self._undo: list[Callable[[], None]] = []
        self._discovery: Discovery | None = None
        self._pins: dict[str, PinnedState] = {}
        self.state_mode: StateMode = check_state_mode(self.state)
        if isinstance(self.services, str):
            self.mode: ServicesMode = check_mode(self.services)
            self.declared: list[ServiceSpec] = []
        else:
            self.mode = "none"
            self.declared = list(self.services)

    # --- context manager -------------------------------------------------------------------

    def begin(self) -> tuple[Store, RunWriter, Redactor, int]:
        """Create the run (manifest with status ``running``); return the store, the writer,
        the redactor and the run's seed. :meth:`__enter__` and the command wrapper share it."""
        store = as_store(self.store)
        clock = self.clock or SystemClock()
        seed = self.seed if self.seed is not None else secrets.randbits(31)
        env = dict(os.environ if self.environ is None else self.environ)
        redactor = Redactor(self.redaction, env, store.placeholder_key())
        started = clock.time()
        cwd = self.cwd or os.getcwd()
        run_id = self.run_id or make_run_id(self.name, started)
        services = [self._capture_service(store, redactor, spec) for spec in self.declared]
        manifest = Manifest(
            run_id=run_id,
            name=self.name,
            created=start_datetime(clock),
            pid=os.getpid(),
            host=host(),
            entrypoint=self.entrypoint
            or Entrypoint(kind="command", command=command_line(), cwd=cwd),
            code=code_version(cwd, lambda data, media: store.put_blob(redactor.bytes(data), media)),
            runtime=runtime(self.packages),
            env=redactor.environ(env, self.redaction.env_record),
            clock=ClockInfo(start=start_datetime(clock), timezone=local_timezone(env)),
            seeds={"run": seed, "uuid4": derive_seed(seed, "uuid4")},
            services=services,
            labels=dict(self.labels),
        )
        writer = store.begin(redact_manifest(manifest, redactor))
        return store, writer, redactor, seed

    def __enter__(self) -> Recorder:
        if self._recorder is not None:
            raise CaptureError("this capture is already running; use a new run(...)")
        active = boundary.current()
        if isinstance(active, Recorder) and active.replaying:
            # Inside a replay this block *is* the run being replayed: hand over to the
            # replay's recorder (no second run; an escaping exception is the replay's).
            return active
        store, writer, redactor, seed = self.begin()
        recorder = Recorder(
            writer,
            store,
            redactor=redactor,
            clock=self.clock or SystemClock(),
            blob_threshold=self.blob_threshold,
        )
        try:
            self._undo.append(boundary.install(recorder))
        except BaseException:
            writer.close()
            raise
        self._recorder = recorder
        try:
            self._discovery = Discovery(
                recorder.writer,
                store,
                redactor,
                mode=self.mode,
                declared={endpoint_key(s.kind, s.endpoint): s.name for s in self.declared},
                environ=self.environ if self.environ is not None else os.environ,
                state=self.state_mode,
            )
            self._undo.append(self._discovery.install())
            self._undo.extend(start_recording(recorder, seed, http=self.http, ids=self.ids))
            self._undo.append(
                follow_captured_children(recorder, seed, self.redaction, self.blob_threshold)
            )
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return recorder

    def _capture_service(self, store: Store, redactor: Redactor, spec: ServiceSpec) -> ServiceState:
        from sandbox.services.capture import begin_service_capture

        mask = spec.mask or self.redaction.mask_for(spec.name, spec.kind)
        key = store.placeholder_key()
        state, pinned = begin_service_capture(
            spec.kind, spec.name, spec.endpoint, store, mask=mask, key=key, state=self.state_mode
        )
        if pinned is not None:
            self._pins[spec.name] = pinned
        binding = Binding(env=spec.env, value=redactor.text(spec.endpoint))
        return state.model_copy(update={"binding": binding})

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        recorder = self._recorder
        if recorder is None:
            return
        try:
            if exc is not None:
                recorder.record_exception(exc)
            recorder.flush_pending()
        finally:
            for undo in reversed(self._undo):
                undo()
            self._undo.clear()
            self._recorder = None
            recorder.closed = True
            recorder.writer.close()
        seal(recorder)
        self.finish(recorder)

    def finish(self, recorder: Recorder, exit_code: int | None = None) -> Manifest:
        """Capture the services' end states and complete the manifest."""
        from sandbox.services.capture import capture_end_state

        store = recorder.store
        if self._discovery is not None:
            recorder.writer.manifest = recorder.writer.manifest.model_copy(
                update={"services": self._discovery.end_states()}
            )
        manifest = recorder.writer.manifest
        specs = {spec.name: spec for spec in self.declared}
        key = store.placeholder_key()
        services = [
            capture_end_state(
                state,
                specs[state.name].endpoint,
                store,
                mask=specs[state.name].mask or self.redaction.mask_for(state.name, state.kind),
                key=key,
                pinned=self._pins.pop(state.name, None),
            )
            if state.name in specs
            else state
            for state in manifest.services
        ]
        return finish_manifest(
            store,
            redact_manifest(
                manifest.model_copy(update={"services": services, "failure": recorder.failure}),
                recorder.redactor,
            ),
            recorder.writer,
            exit_code=exit_code,
        )

    async def __aenter__(self) -> Recorder:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # --- decorator -----------------------------------------------------------------------

    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: each call is a captured run. Its entrypoint is ``module:function``,
        or, for a function of a script (``__main__``), the command line that ran it."""
        target = f"{fn.__module__}:{fn.__qualname__}"

        def fresh() -> Capture:
            if self.entrypoint is not None or fn.__module__ == "__main__":
                return replace(self)
            entry = Entrypoint(kind="callable", target=target, cwd=self.cwd or os.getcwd())
            return replace(self, entrypoint=entry)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                async with fresh():
                    return await fn(*args, **kwargs)

            return cast(F, awrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with fresh():
                return fn(*args, **kwargs)

        return cast(F, wrapper)


def start_recording(
    recorder: Recorder, seed: int, *, http: bool = True, ids: bool = True, entropy: bool = True
) -> list[Callable[[], None]]:
    """Seed the generators, patch ``uuid4``, httpx, the MCP client, the agent frameworks'
    tools, the entropy sources (:mod:`sandbox.capture.entropy`) and tenacity's retries; record
    the seeds in the manifest. Return the undo functions (the recorder must be installed
    already)."""
    reads, stop_tracking = track_env_reads()
    recorder.env_reads = reads
    undo: list[Callable[[], None]] = [stop_tracking]
    seeds = seed_generators(seed)
    if entropy:
        undo.append(patch_entropy())
    undo.append(patch_tenacity())
    if ids:
        undo.append(patch_uuid4(derive_seed(seed, "uuid4")))
    if http:
        undo.append(patch_httpx())
        undo.append(patch_mcp())
        undo.append(patch_frameworks())
    manifest = recorder.writer.manifest
    recorder.writer.update_manifest(
        manifest.model_copy(update={"seeds": {**manifest.seeds, **seeds}}), durable=False
    )
    return undo


_LLM_LINE = b'{"kind":"llm",'
"""How a model call's line of the event log starts (``dump_event`` writes the kind first)."""


def finish_manifest(
    store: Store, manifest: Manifest, writer: Any, *, exit_code: int | None = None
) -> Manifest:
    """Mark a run complete: count and hash its event log as it stands. Only the model calls'
    lines are parsed (for the models list); the others are counted (one a line)."""
    data = store.read_events_bytes(manifest.run_id)
    if data and not data.endswith(b"\n"):  # a torn last line: keep only whole events
        data = data[: data.rfind(b"\n") + 1]
        with store.resume(manifest.run_id) as torn:
            torn.replace_events(data)
    models = manifest.models
    if not models:
        llm_lines = (line for line in data.split(b"\n") if line.startswith(_LLM_LINE))
        models = models_of([parse_event(line, EVENTS) for line in llm_lines])
    done = manifest.model_copy(
        update={
            "status": "complete",
            "event_count": data.count(b"\n"),
            "events_sha256": sha256_bytes(data),
            "blob_bytes": referenced_blob_bytes(manifest, data),
            "models": models,
            "exit_code": exit_code if exit_code is not None else manifest.exit_code,
        }
    )
    writer.update_manifest(done)
    return done


def models_of(events: Sequence[Event]) -> list[ModelInfo]:
    """The models the run called, each with the parameters it was called with (once per
    distinct provider, model and parameters, in first-call order)."""
    found: dict[bytes, ModelInfo] = {}
    for event in events:
        if isinstance(event, LLMCall) and event.model:
            info = ModelInfo(provider=event.provider, model=event.model, params=event.params)
            found.setdefault(canonical_json(info.model_dump(mode="json")), info)
    return list(found.values())


run = Capture
"""Capture a run: ``with run("name", store=..., seed=...) as rec`` or ``@run("name")``; the
settings are :class:`Capture`'s fields, as keywords with their types (``store``,
``services`` (:class:`ServiceSpec`), ``seed``, ``run_id``, ``redaction``
(:class:`~sandbox.capture.redact.RedactionConfig`), ``clock``, ``http``, ``ids``,
``environ``, ``cwd``, ``entrypoint``, ``blob_threshold``, ``packages``, ``labels``,
``state``)."""
