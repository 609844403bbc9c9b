"""``run(...)``: capture one agent run, as a context manager or a decorator (sync or async).

::

    with sandbox.capture.run("checkout", store="snapshots", seed=7) as rec:
        agent.run()
        rec.set_result(answer)

On entry: the run folder is created (manifest with status ``running``), the recorder serves
the block's context (the asyncio tasks and threads it starts inherit it: many runs record at
once in one process, each holding only its own events), ``random`` (and numpy) are seeded
when no other run is recording, ``uuid.uuid4`` draws from the run's seeded generator, and
the process-wide patches (httpx, the SDKs, MCP, tenacity, entropy, environment reads) are
held: installed by the first run, undone by the last. On exit: pending events are written,
the services' end states are captured and the manifest is finished (``complete``, failure,
``event_count``, ``events_sha256``). An exception escaping the block marks the run failed
with an :class:`ExceptionPredicate` and propagates unchanged.

``keep`` decides at the end whether the run stays (see :mod:`sandbox.capture.retention`).
Capture fails open: no error of its own reaches the agent (one warning on stderr, the run
marked ``damaged``; see :mod:`sandbox.capture.recorder`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
import os
import random
import re
import secrets
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sandbox.capture import finisher
from sandbox.capture.aiohttp_http import patch_aiohttp
from sandbox.capture.botocore_http import patch_botocore
from sandbox.capture.children import follow_captured_children
from sandbox.capture.clients import endpoint_key
from sandbox.capture.clock import SystemClock, TimeSource, local_timezone, start_datetime
from sandbox.capture.discovery import (
    Discovery,
    ServicesMode,
    StateMode,
    check_mode,
    check_state_mode,
)
from sandbox.capture.durable import sync_later
from sandbox.capture.entropy import patch_entropy
from sandbox.capture.environment import code_version, host, runtime
from sandbox.capture.envreads import read_before_runs, track_env_reads
from sandbox.capture.frameworks import patch_frameworks
from sandbox.capture.held import HeldWriter
from sandbox.capture.http import patch_httpx
from sandbox.capture.ids import SeededUUID, derive_seed, patch_uuid4, seed_generators
from sandbox.capture.imports import undo_all
from sandbox.capture.mcp import patch_mcp
from sandbox.capture.openings import OPENINGS, call_label
from sandbox.capture.recorder import BLOB_THRESHOLD, Recorder
from sandbox.capture.requests_http import patch_requests
from sandbox.capture.retention import Keep, Staging, check_keep, keeps_all, kept
from sandbox.capture.retry import patch_tenacity
from sandbox.capture.scrub import (
    check_run_id,
    recorded_env,
    redact_manifest,
    redact_runtime,
    seal,
)
from sandbox.capture.shared import Shared
from sandbox.capture.threads import THREADS
from sandbox.capture.uuidutils import patch_uuid_utils
from sandbox.errors import CaptureError
from sandbox.names import (
    CALL_LABEL_MAX,
    NAMING_BY_ORIGIN,
    NAMING_LABEL,
    OPENED_IN_PROGRAM,
    OPENED_LABEL,
    OPENING_AFTER_LABEL,
    OPENING_CALL_LABEL,
    OPENING_LABEL,
    OVERLAPPED_LABEL,
)
from sandbox.redaction import RedactionConfig, Redactor
from sandbox.seam import boundary
from sandbox.snapshot.events import BlobRef, Event, LLMCall
from sandbox.snapshot.hashing import canonical_json, sha256_bytes
from sandbox.snapshot.manifest import (
    Binding,
    CodeVersion,
    Entrypoint,
    Manifest,
    ModelInfo,
    Runtime,
    ServiceState,
)
from sandbox.snapshot.manifest import Clock as ClockInfo
from sandbox.snapshot.store import (
    EVENTS,
    LLM_LINE,
    MANIFEST,
    DirectoryStore,
    RunWriter,
    Store,
    as_store,
    event_blob_sizes,
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
    """The name of a registered service kind (:func:`sandbox.services.registry.kinds`)."""
    endpoint: str
    env: str | None = None
    """The environment variable through which the agent finds it (``DATABASE_URL``)."""
    mask: Mapping[str, str] = field(default_factory=dict)
    """Masking rules applied to what is captured, ``{TARGET: METHOD}``: ``"users.email":
    "hash"`` (see :mod:`sandbox.services.masking`)."""


DAMAGE_LABEL = "sandbox.damage"
"""The label of a ``damaged`` run's manifest saying why its capture failed."""


def make_run_id(name: str, when: float) -> str:
    """``<name>-<UTC time>-<6 hex>``: sortable, unique, safe as a folder name."""
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
    clock: TimeSource | None = None
    http: bool = True
    ids: bool = True
    environ: Mapping[str, str] | None = None
    cwd: str | None = None
    entrypoint: Entrypoint | None = None
    blob_threshold: int = BLOB_THRESHOLD
    packages: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    state: str | None = None
    """How services are captured: ``"whole"``, or ``"touched"``: a service whose kind can
    (:class:`~sandbox.services.base.TouchedCapture`) holds only the part of its state the
    run touched. Unset: whole when every run is kept, else touched,
    so that a run not kept costs a pin shared with the runs starting with it, no dump (see
    :mod:`sandbox.services.pinshare`)."""
    keep: Keep = "all"
    """Which runs stay in the store: ``"all"``, ``"failed"`` (a predicate, an exception,
    ``mark_failed``), or a rate (``0.01``): the failed ones and that share of the others. A
    run not kept leaves nothing (see :mod:`sandbox.capture.retention`)."""
    sampler: Callable[[], float] | None = None
    """Draws in [0, 1) deciding whether a run that did not fail is kept at a rate (default:
    a generator of the capture's own, never the agent's)."""

    def __post_init__(self) -> None:
        self.keep = check_keep(self.keep)
        self._staging: Staging | None = None
        self._recorder: Recorder | None = None
        self._handed: Recorder | None = None
        """The replay's recorder this block handed over to (see :meth:`__enter__`)."""
        self._opening: int | None = None
        """Which block of the process this one is, when no other was open as it began."""
        self._undo: list[Callable[[], None]] = []
        self._discovery: Discovery | None = None
        self._pins: dict[str, PinnedState] = {}
        default = "whole" if keeps_all(self.keep) else "touched"
        self.state_mode: StateMode = check_state_mode(self.state or default)
        if isinstance(self.services, str):
            self.mode: ServicesMode = check_mode(self.services)
            self.declared: list[ServiceSpec] = []
        else:
            self.mode = "none"
            self.declared = list(self.services)

    # --- context manager -------------------------------------------------------------------

    def begin(
        self, store: Store | None = None, *, redact: bool = True
    ) -> tuple[Store, RunWriter, Redactor, int]:
        """Create the run (manifest with status ``running``) in ``store`` (default: the
        settings'); return the store, the writer, the redactor and the run's seed.
        :meth:`__enter__` and the command wrapper share it. Not ``redact``: the manifest is
        begun as made (a run held in memory redacts it only if it leaves memory)."""
        store = store if store is not None else as_store(self.store)
        clock = self.clock or SystemClock()
        seed = self.seed if self.seed is not None else secrets.randbits(31)
        env = os.environ.copy() if self.environ is None else dict(self.environ)  # copy: no reads
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
            code=code_version(
                cwd,
                lambda data, media: _put_diff(store, data, media, redactor),
                once=True,
            ),
            runtime=runtime(self.packages),
            env=redactor.environ(env, self.redaction.env_record),
            clock=ClockInfo(start=start_datetime(clock), timezone=local_timezone(env)),
            seeds={"run": seed, "uuid4": derive_seed(seed, "uuid4")},
            services=services,
            labels={
                **self.labels,
                NAMING_LABEL: NAMING_BY_ORIGIN,
                **({OPENED_LABEL: OPENED_IN_PROGRAM} if self.entrypoint is None else {}),
                **(
                    {
                        OPENING_LABEL: str(self._opening),
                        OPENING_AFTER_LABEL: f"{OPENINGS.since_start():.1f}",
                    }
                    if self.entrypoint is None and self._opening is not None
                    else {}
                ),
            },
        )
        if redact:
            manifest = _redacted(manifest, redactor)
        else:
            check_run_id(run_id, redactor.text(run_id))
        writer = store.begin(manifest)
        return store, writer, redactor, seed

    def __enter__(self) -> Recorder:
        if self._recorder is not None:
            raise CaptureError("this capture is already running; use a new run(...)")
        active = boundary.current()
        if isinstance(active, Recorder) and active.replaying:
            # Inside a replay this block is the run being replayed, or another block of the
            # program (sandbox.replay.window): hand over to the replay's recorder (no second
            # run; an escaping exception is the replay's), which begins recording here when
            # the capture did (see Recorder.hand_over).
            self._undo.append(boundary.root_here())  # the block is the run's main, as it was
            active.hand_over(self.labels.get(OPENING_CALL_LABEL))
            self._handed = active
            return active
        if boundary.installed() is not None:
            raise CaptureError(
                "a replay (or a captured command) is active in this process: capture.run "
                "is refused inside it"
            )
        self._opening = OPENINGS.enter()
        self._undo.append(OPENINGS.leave)
        try:
            return self._start()
        except CaptureError:  # the capture was asked wrongly (its settings): say so
            self._release()
            raise
        except Exception as exc:  # the capture's own failure: the agent runs on, unrecorded
            self._release()
            return _unrecorded(self, exc)

    def _start(self) -> Recorder:
        target = as_store(self.store)
        if not keeps_all(self.keep):
            self._staging = Staging(target)
        staging = self._staging
        store, writer, redactor, seed = self.begin(
            target if staging is None else staging.store, redact=staging is None
        )
        recorder = Recorder(
            writer,
            store,
            redactor=redactor,
            clock=self.clock or SystemClock(),
            blob_threshold=self.blob_threshold,
        )
        self._recorder = recorder
        if isinstance(writer, HeldWriter):  # most such runs are dropped: redacted if kept
            writer.clean = functools.partial(_redacted, redactor=redactor)
            # Its manifest is updated in memory while it runs (services found, their pins):
            # written once, when the run ends kept; one dropped never is.
            writer.holds_manifest = True
        self._undo.append(boundary.enter(recorder))
        try:
            self._bind_pins()
            self._discovery = Discovery(
                recorder.writer,
                store,
                redactor,
                mode=self.mode,
                declared={endpoint_key(s.kind, s.endpoint): s.name for s in self.declared},
                environ=redactor.env,  # the run's environment, copied at its start
                state=self.state_mode,
            )
            self._undo.append(self._discovery.install())
            self._undo.extend(
                start_recording(recorder, seed, http=self.http, ids=self.ids, save=False)
            )
            self._undo.append(
                follow_captured_children(
                    recorder, seed, self.redaction, self.blob_threshold, self._discovery
                )
            )
        except Exception as exc:
            recorder.damage(exc)
        return recorder

    def _bind_pins(self) -> None:
        """Declared services pinned before the run served its context observe it now."""
        from sandbox.services.base import run_bound

        for pinned in self._pins.values():
            bound = run_bound(pinned)
            if bound is not None:
                bound.bind()

    def _capture_service(self, store: Store, redactor: Redactor, spec: ServiceSpec) -> ServiceState:
        from sandbox.services.statecapture import begin_service_capture

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
        handed, self._handed = self._handed, None
        if handed is not None:
            try:
                handed.hand_back(exc)
            finally:
                self._release()  # the block's main task
            return
        recorder = self._recorder
        if recorder is None:
            return
        self._recorder = None
        try:
            self._end(recorder, exc)
        except Exception as error:  # the capture's own: the agent's outcome stands
            recorder.damage(error)
            self._abandon(recorder)
        finally:
            self._release()

    def _end(self, recorder: Recorder, exc: BaseException | None) -> None:
        try:
            if exc is not None:
                recorder.record_exception(exc)
            recorder.flush_pending()
        finally:
            for undo in reversed(self._undo):
                try:
                    undo()
                except Exception as error:
                    recorder.damage(error)
            self._undo.clear()
            recorder.closed = True
            recorder.writer.close(durable=False)  # synced once sealed, off the agent's path
            _write_manifest(recorder.writer)
        if recorder.damaged is not None:
            self._abandon(recorder)
            return
        if not kept(self.keep, recorder.failure is not None, self.sampler):
            return  # _release removes the run aside
        if keeps_all(self.keep):
            self._complete(recorder)
            return
        # A run kept out of many (keep="failed", a rate): its services' states, blobs and
        # manifest are written in the background, the agent does not wait (its pinned states,
        # discovery and staging go with it and are released there).
        detached = copy.copy(self)
        self._pins, self._discovery, self._staging = {}, None, None
        for pinned in detached._pins.values():
            _end_observing(pinned)
        if detached._discovery is not None:
            detached._discovery.end_observing()
        dumps = bool(detached._pins) or (
            detached._discovery is not None and detached._discovery.holds_pins
        )  # its end states are dumped: worth finishing with the runs kept soon after it
        finisher.submit(functools.partial(detached._complete_later, recorder), gather=dumps)

    def _complete_later(self, recorder: Recorder) -> None:
        """:meth:`_complete` on the background thread: an error of its own damages the run
        (one warning), what the run held is released in any case."""
        try:
            self._complete(recorder)
        except Exception as error:
            recorder.damage(error)
            self._abandon(recorder)
        finally:
            self._release()

    def _complete(self, recorder: Recorder) -> None:
        """Seal a kept run: redact what was written before a secret was learned, capture
        its services' end states, finish the manifest, publish it from aside (a run held
        in memory is sealed there and written into the store whole: see
        :mod:`sandbox.capture.held`)."""
        recorder.writer.redact_held()  # what its lines teach the redactor, before sealing
        if recorder.damaged is not None:  # a line held could not be made
            raise CaptureError(recorder.damaged)
        if recorder.redactor.learned:
            with _sealing(recorder.writer, recorder.redactor):
                seal(recorder)
        else:  # nothing written before a secret was learned: only the variables read
            manifest = recorder.writer.manifest
            env = {**manifest.env, **recorded_env(recorder)}
            recorder.writer.manifest = manifest.model_copy(update={"env": env})
        self.finish(recorder, durable=False, sealed=True)
        store = recorder.store
        if self._staging is not None:
            staging, self._staging = self._staging, None
            staging.publish(recorder.run_id)
            store = staging.target
        if isinstance(store, DirectoryStore):
            folder = store.run_dir(recorder.run_id)
            sync_later([folder / EVENTS, folder / MANIFEST, folder])

    def _abandon(self, recorder: Recorder) -> None:
        """A damaged run: marked so where it can be, never sealed as complete (dropped when
        it is aside and not kept)."""
        with contextlib.suppress(Exception):
            writer = recorder.writer
            _write_manifest(writer)
            writer.update_manifest(
                writer.manifest.model_copy(
                    update={
                        "status": "damaged",
                        "labels": {**writer.manifest.labels, DAMAGE_LABEL: recorder.damaged},
                        "failure": recorder.failure,
                    }
                )
            )
            if self._staging is not None and kept(
                self.keep, recorder.failure is not None, self.sampler
            ):
                staging, self._staging = self._staging, None
                staging.publish(recorder.run_id)

    def _release(self) -> None:
        """Let go of what a run that ends here still holds: services' pinned states, the
        run recorded aside (a run not kept, or damaged), the patches of a failed start."""
        for undo in reversed(self._undo):
            with contextlib.suppress(Exception):
                undo()
        self._undo.clear()
        for pinned in self._pins.values():
            with contextlib.suppress(Exception):
                pinned.close()
        self._pins.clear()
        if self._discovery is not None:
            self._discovery.release()
        if self._staging is not None:
            staging, self._staging = self._staging, None
            staging.discard()

    def finish(
        self,
        recorder: Recorder,
        exit_code: int | None = None,
        *,
        durable: bool = True,
        sealed: bool = False,
    ) -> Manifest:
        """Capture the services' end states and complete the manifest (synced unless not
        ``durable``; ``sealed``: the manifest was redacted by :func:`seal` just before)."""
        from sandbox.services.statecapture import capture_end_state

        store = recorder.store
        if self._discovery is not None:
            recorder.writer.manifest = recorder.writer.manifest.model_copy(
                update={"services": self._discovery.end_states()}
            )
        manifest = recorder.writer.manifest
        specs = {spec.name: spec for spec in self.declared}
        key = store.placeholder_key() if specs else b""
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
        labels = manifest.labels
        if recorder.overlapped:
            labels = {**labels, OVERLAPPED_LABEL: str(recorder.overlapped)}
        finished = manifest.model_copy(
            update={"services": services, "failure": recorder.failure, "labels": labels}
        )
        writer = recorder.writer
        on_write = isinstance(writer, HeldWriter) and writer.clean is not None  # redacts it
        if not on_write and (services or recorder.failure is not None or not sealed):
            finished = _redacted(finished, recorder.redactor)  # else redacted already
        return finish_manifest(
            store,
            finished,
            recorder.writer,
            exit_code=exit_code,
            durable=durable,
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
        """Decorate ``fn``: each call is a captured run, whose result (unless the run set one)
        is what ``fn`` returned (see :meth:`Recorder.offer_result`). Its entrypoint is
        ``module:function``, or, for a function of a script (``__main__``), the command line
        that ran it; with the call's arguments when they are all JSON (a task's: replay calls
        it with them again).
        A Celery task made with ``bind=True`` gets the task first: that one is left out, as
        calling the task (what ``module:function`` names) at replay passes it again."""
        target = f"{fn.__module__}:{fn.__qualname__}"

        def fresh(args: tuple[Any, ...], kwargs: dict[str, Any], called: object) -> Capture:
            if self.entrypoint is not None:
                return replace(self)
            if fn.__module__ == "__main__":  # the command line: the call finds its block
                return replace(self, labels={**self.labels, **_call_labels(fn, args, kwargs)})
            entry = Entrypoint(kind="callable", target=target, cwd=self.cwd or os.getcwd())
            if args and getattr(type(args[0]), "run", None) is called:
                args = args[1:]  # the task this function is the bound ``run`` of
            if all(map(_plain_json, args)) and _plain_json(kwargs):
                entry = entry.model_copy(update={"args": list(args), "kwargs": kwargs})
            return replace(self, entrypoint=entry)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                async with fresh(args, kwargs, awrapper) as rec:
                    value = await fn(*args, **kwargs)
                    rec.offer_result(value)
                    return value

            return cast(F, awrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with fresh(args, kwargs, wrapper) as rec:
                value = fn(*args, **kwargs)
                rec.offer_result(value)
                return value

        return cast(F, wrapper)


def _call_labels(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, str]:
    """The label of a call of a script's decorated function, by which the replay of the
    script finds the call's block among others (:mod:`sandbox.replay.window`): none when
    its arguments are not all JSON, or long."""
    if not (all(map(_plain_json, args)) and _plain_json(kwargs)):
        return {}
    label = call_label(fn.__qualname__, list(args), kwargs)
    return {OPENING_CALL_LABEL: label} if len(label) <= CALL_LABEL_MAX else {}


def _plain_json(value: object) -> bool:
    """Whether ``value`` is JSON as it is (``None``, a bool, int, finite float or str, lists
    and str-keyed dicts of them): it reads back the same, so a call replays with it alike."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(map(_plain_json, value))
    if type(value) is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    return False


def _write_manifest(writer: RunWriter) -> None:
    """A held manifest (:attr:`HeldWriter.holds_manifest`) is written again on updates."""
    if isinstance(writer, HeldWriter):
        writer.holds_manifest = False


def _end_observing(pinned: PinnedState) -> None:
    """A pinned state that observes its run (:class:`~sandbox.services.base.RunBound`)
    stops: the run is over, what its context sends next is not its own."""
    from sandbox.services.base import run_bound

    bound = run_bound(pinned)
    if bound is not None:
        with contextlib.suppress(Exception):
            bound.unbind()


_recording: weakref.WeakSet[Recorder] = weakref.WeakSet()
"""The runs recording in this process (capture's and replay's)."""
_starts = [0]
"""How many runs have joined :data:`_recording` so far: a run that leaves it counts those
that joined after it without looking at each run still recording."""
_seeding = threading.Lock()
"""Held while a starting run looks at :data:`_recording` (and seeds if it is empty) and
joins it, and while a run leaves it."""


def _leave(recorder: Recorder, joined: int) -> None:
    """``recorder`` stops recording; its :attr:`~Recorder.overlapped` gains the runs that
    started after it joined as the ``joined``-th (it counted those recording then)."""
    with _seeding:
        _recording.discard(recorder)
        recorder.overlapped += _starts[0] - joined


@functools.cache
def _patches(*, http: bool, ids: bool, entropy: bool) -> Shared:
    """The process-wide patches a run with these settings holds, as one patch: a run
    takes one hold of it (one release it keeps), not one of each; the first run with
    these settings installs each patch (each counted on its own, so runs with other
    settings share them), the last one to end lets go of them."""
    return Shared(functools.partial(_install_patches, http=http, ids=ids, entropy=entropy))


def _install_patches(*, http: bool, ids: bool, entropy: bool) -> Callable[[], None]:
    undo: list[Callable[[], None]] = []
    try:
        undo.append(track_env_reads())
        undo.append(THREADS.acquire())
        if entropy:
            undo.append(patch_entropy())
        undo.append(patch_tenacity())
        if ids:
            undo.append(patch_uuid4())
            undo.append(patch_uuid_utils())
        if http:
            undo.append(patch_httpx())
            undo.append(patch_requests())
            undo.append(patch_aiohttp())
            undo.append(patch_botocore())
            undo.append(patch_mcp())
            undo.append(patch_frameworks())
    except BaseException:
        for step in reversed(undo):
            step()
        raise
    return undo_all(undo)


def start_recording(
    recorder: Recorder,
    seed: int,
    *,
    http: bool = True,
    ids: bool = True,
    entropy: bool = True,
    save: bool = True,
    generators: bool | None = None,
) -> list[Callable[[], None]]:
    """Seed the generators, give the run its seeded ``uuid4`` (and record ``uuid_utils``' ids:
    :mod:`sandbox.capture.uuidutils`), and hold the process-wide
    patches (httpx, the MCP client, the agent frameworks' tools, the entropy sources
    (:mod:`sandbox.capture.entropy`), tenacity's retries, environment reads, threads
    inheriting the run); record the seeds in the manifest (written now when ``save``).
    Return the undo functions (the recorder must serve the current context already).

    ``random`` and numpy's global generator are seeded only when no other run records in
    the process: reseeding them under a running run would change that run's draws (and so
    its replay); a run that starts under another records no seed for them. ``generators``
    (a replay: whether the recorded run seeded them) decides instead; one that did not is
    replayed without that crossing (it would be one the recording lacks), the generators
    seeded quietly from the run's seed so that replays draw alike."""
    recorder.env_reads.update(read_before_runs())
    tempfile.gettempdir()  # its first lookup in a process draws a name: the process's, not a run's
    with _seeding:  # no other run between the look and the add: it would seed again
        seeding = not _recording if generators is None else generators
        seeds = seed_generators(seed) if seeding else {}
        if generators is False:
            random.seed(derive_seed(seed, "unrecorded"))
        recorder.overlapped = len(_recording)
        _recording.add(recorder)
        _starts[0] += 1
        joined = _starts[0]
    try:
        release = _patches(http=http, ids=ids, entropy=entropy).acquire()
    except BaseException:
        _leave(recorder, joined)
        raise
    if ids:
        recorder.uuid4_source = SeededUUID(derive_seed(seed, "uuid4"))
    # Undone last first: the patches let go before the run leaves ``_recording``, so no
    # run starting then sees none recording while the entropy sources are still patched.
    undo: list[Callable[[], None]] = [functools.partial(_leave, recorder, joined), release]
    manifest = recorder.writer.manifest
    seeded = manifest.model_copy(update={"seeds": {**manifest.seeds, **seeds}})
    if save:
        recorder.writer.update_manifest(seeded, durable=False)
    else:  # written when the run ends
        recorder.writer.manifest = seeded
    return undo


_redacted_diffs: dict[tuple[object, bytes, bytes], tuple[object, bytes, str]] = {}


def _put_diff(store: Store, data: bytes, media: str, redactor: Redactor) -> BlobRef:
    """Store the code's diff redacted, redacting and hashing it once per process for each
    set of secrets and store key (it is read once per process too); a store that holds it
    already is only asked."""
    state = redactor.state
    key = (id(state), redactor.key, data)
    found = _redacted_diffs.get(key)
    if found is None or found[0] is not state:
        if len(_redacted_diffs) >= 16:
            _redacted_diffs.clear()
        clean = redactor.bytes(data)
        found = _redacted_diffs[key] = (state, clean, sha256_bytes(clean))
    _, clean, sha = found
    if store.claim_blob(sha):
        return BlobRef(sha256=sha, size=len(clean), media_type=media)
    return store.put_blob(clean, media)


_BARE: dict[str, Any] = {"host": None, "entrypoint": None, "code": CodeVersion(), "runtime": None}
"""Manifest fields that are the same for every run of a process (redacted once), unset."""
_PROCESS_FIELDS = tuple(_BARE)
_redacted_process: dict[tuple[object, bytes], tuple[object, tuple[Any, ...], dict[str, Any]]] = {}


def _process_redacted(manifest: Manifest, redactor: Redactor) -> dict[str, Any]:
    """The fields of ``manifest`` that are the process's (host, entrypoint, code version,
    runtime and its package list), redacted by ``redactor``: worked out once per process for
    the same values, secrets and store key."""
    values = tuple(getattr(manifest, name) for name in _PROCESS_FIELDS)
    state = redactor.state
    key = (id(state), redactor.key)
    found = _redacted_process.get(key)
    if found is not None and found[0] is state and found[1] == values:
        return found[2]
    fields = {
        name: value if value is None else _redact_field(value, redactor)
        for name, value in zip(_PROCESS_FIELDS, values, strict=True)
    }
    if len(_redacted_process) >= 64:
        _redacted_process.clear()
    _redacted_process[key] = (state, values, fields)
    return fields


def _redact_field(value: Any, redactor: Redactor) -> Any:
    """A manifest field's value (a string or a model) with every string in it redacted (a
    runtime as :func:`redact_runtime` does)."""
    if isinstance(value, str):
        return redactor.text(value)
    data = value.model_dump(mode="json")
    if isinstance(value, Runtime):
        return Runtime.model_validate(redact_runtime(data, redactor))
    return type(value).model_validate(redactor.value(data))


def _redacted(manifest: Manifest, redactor: Redactor) -> Manifest:
    """:func:`redact_manifest`, with the fields that are the process's redacted once per
    process (:func:`_process_redacted`)."""
    fields = _process_redacted(manifest, redactor)
    bare = manifest.model_copy(update=_BARE)
    return redact_manifest(bare, redactor).model_copy(update=fields)


@contextlib.contextmanager
def _sealing(writer: RunWriter, redactor: Redactor) -> Iterator[None]:
    """Within the block the manifest is held in memory (the finished one is written next)
    and without the fields that are the process's (redacted at :meth:`Capture.begin`);
    after it, with them again, redacted again with every secret known by then."""
    manifest = writer.manifest
    writer.manifest = manifest.model_copy(update=_BARE)

    def hold(manifest: Manifest, *, durable: bool = True) -> None:
        writer.manifest = manifest

    writer.update_manifest = hold  # type: ignore[method-assign]
    try:
        yield
    finally:
        del writer.update_manifest
        process = _process_redacted(manifest, redactor)
        writer.manifest = writer.manifest.model_copy(update=process)


class _Nowhere(RunWriter):
    """The writer of a run whose capture could not start: it keeps nothing."""

    def __init__(self, manifest: Manifest) -> None:
        self.folder = Path(os.devnull)
        self.manifest = manifest

    def append_raw(self, line: bytes) -> None:
        pass

    def update_manifest(self, manifest: Manifest, *, durable: bool = True) -> None:
        self.manifest = manifest

    def close(self, *, durable: bool = True) -> None:
        pass


def _unrecorded(capture: Capture, error: BaseException) -> Recorder:
    """A recorder for a run whose capture failed to start: the block runs unrecorded (its
    methods do nothing), after one warning."""
    when = time.time()
    try:
        run_id = capture.run_id or make_run_id(capture.name, when)
        manifest = Manifest(run_id=run_id, name=capture.name, created=datetime.now(UTC))
    except Exception:
        manifest = Manifest(run_id=make_run_id("run", when), created=datetime.now(UTC))
    recorder = Recorder(_Nowhere(manifest), DirectoryStore(os.devnull))
    recorder.damage(error)
    recorder.closed = True
    return recorder


def finish_manifest(
    store: Store,
    manifest: Manifest,
    writer: Any,
    *,
    exit_code: int | None = None,
    durable: bool = True,
) -> Manifest:
    """Mark a run complete: count and hash its event log as it stands. Only the model calls'
    lines are parsed (for the models list); the others are counted (one a line). When the
    writer appended the whole log itself, what it tallied on the way is used instead of
    reading the log back. The manifest is synced unless not ``durable`` (the caller syncs
    it)."""
    tally = writer.tally() if isinstance(writer, RunWriter) else None
    if tally is not None:
        count, digest = tally.count, tally.digest.hexdigest()
        blobs = tally.blobs
        llm_lines = [] if manifest.models else tally.read_llm_lines(writer.folder / EVENTS)
    else:
        data = store.read_events_bytes(manifest.run_id)
        if data and not data.endswith(b"\n"):  # a torn last line: keep only whole events
            data = data[: data.rfind(b"\n") + 1]
            with store.resume(manifest.run_id) as torn:
                torn.replace_events(data)
        count, digest = data.count(b"\n"), sha256_bytes(data)
        blobs = event_blob_sizes(data)
        llm_lines = [line for line in data.split(b"\n") if line.startswith(LLM_LINE)]
    models = manifest.models or models_of([parse_event(line, EVENTS) for line in llm_lines])
    done = manifest.model_copy(
        update={
            "status": "complete",
            "event_count": count,
            "events_sha256": digest,
            "blob_bytes": referenced_blob_bytes(  # the runtime holds no blob (a long walk)
                manifest.model_copy(update={"runtime": None}), b"", blobs
            ),
            "models": models,
            "exit_code": exit_code if exit_code is not None else manifest.exit_code,
        }
    )
    writer.update_manifest(done, durable=durable)
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
(:class:`~sandbox.redaction.RedactionConfig`), ``clock``, ``http``, ``ids``,
``environ``, ``cwd``, ``entrypoint``, ``blob_threshold``, ``packages``, ``labels``,
``state``)."""
