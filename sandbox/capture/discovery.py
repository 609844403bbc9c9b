"""Services found at capture: every connection the agent opens through a common client is
recorded in the manifest (``touched``, credentials redacted), and with ``services="auto"``
the state of each service found is captured the moment the agent first connects to it (the
restore point: nothing has gone through that connection yet) and again when the run ends.

::

    with capture.run("checkout", services="auto"):     # or: sandbox capture --services auto
        agent.run()

``services="auto"`` is the default. ``services="none"`` records the endpoints only: on
replay a connection to one of them has no sandbox counterpart and is refused. Declared
services (:class:`ServiceSpec`) are captured as before and linked to the connections that
reach them; the other services found are then recorded only.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from sandbox.capture.clients import Connect, address_of, endpoint_key
from sandbox.capture.clients import install as install_clients
from sandbox.capture.shared import Shared
from sandbox.errors import CaptureError, SandboxError
from sandbox.redaction import Redactor
from sandbox.seam import boundary
from sandbox.snapshot.manifest import ServiceState, TouchedService
from sandbox.snapshot.store import RunWriter, Store

if TYPE_CHECKING:  # the service kinds (and their clients) load when a service is captured
    from sandbox.services.base import PinnedState

ServicesMode = Literal["auto", "none"]
MODES: tuple[ServicesMode, ...] = ("auto", "none")


StateMode = Literal["whole", "touched"]
"""How a service's state is captured: whole, or only what the run touched (see
:class:`sandbox.services.base.TouchedCapture`)."""
STATE_MODES: tuple[StateMode, ...] = ("whole", "touched")


def check_state_mode(mode: str) -> StateMode:
    found = next((m for m in STATE_MODES if m == mode), None)
    if found is None:
        raise CaptureError(f"state mode {mode!r} is not one of: {', '.join(STATE_MODES)}")
    return found


def check_mode(mode: str) -> ServicesMode:
    if mode not in MODES:
        raise CaptureError(f"services mode {mode!r} is not one of: {', '.join(MODES)}")
    return "auto" if mode == "auto" else "none"


class Discovery:
    """The capture's client router: connections pass unchanged, the services behind them are
    recorded (and captured, in ``auto`` mode) in the run's manifest."""

    def __init__(
        self,
        writer: RunWriter,
        store: Store,
        redactor: Redactor,
        *,
        mode: ServicesMode,
        declared: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        state: StateMode = "whole",
    ) -> None:
        self.writer = writer
        self.store = store
        self.redactor = redactor
        self.mode = mode
        self.endpoints: dict[str, str] = {}
        """Captured service name -> its real endpoint (in memory only: it may hold a
        password), for the end state."""
        self._declared = dict(declared or {})
        """Endpoint key -> name of the declared service there."""
        self._environ = dict(environ or {})
        self._touched: dict[str, TouchedService] = {}
        self._capturing: set[str] = set()
        """Servers being captured: their connections (from the kind's worker threads too)
        pass unrecorded."""
        self._lock = threading.Lock()
        self.state: StateMode = state
        """``"touched"``: capture only what the run touched (see
        :mod:`sandbox.services.statecapture`)."""
        self._pins: dict[str, PinnedState] = {}
        """Captured service name -> its state held since the first connection (touched)."""

    def install(self) -> Callable[[], None]:
        """Route here the connections made in the current boundary's context (the run's);
        the clients are patched once for every run of the process. Return the undo."""
        return _CLIENTS.acquire_for(_routers, id(boundary.current()), self)

    def __call__(self, connect: Connect) -> str:
        try:
            return self._route(connect)
        except Exception as error:  # the capture's own: the agent's connection goes on
            run = boundary.current()
            damage = getattr(run, "damage", None)
            if callable(damage):
                damage(error)
            return connect.endpoint

    def _route(self, connect: Connect) -> str:
        if address_of(connect.kind, connect.endpoint) in self._capturing:
            return connect.endpoint  # the service kind's own connections (any thread)
        key = endpoint_key(connect.kind, connect.endpoint)
        with self._lock:
            seen = self._touched.get(key)
            if seen is None:
                self._touched[key] = self._found(connect, key)
            elif connect.client not in seen.clients:
                clients = [*seen.clients, connect.client]
                self._touched[key] = seen.model_copy(update={"clients": clients})
            else:
                return connect.endpoint
            self._save()
        return connect.endpoint

    def _found(self, connect: Connect, key: str) -> TouchedService:
        name = self._declared.get(key)
        if name is None and self.mode == "auto":
            name = self._capture(connect)
        return TouchedService(
            kind=connect.kind,
            endpoint=self._redacted(connect.endpoint),
            clients=[connect.client],
            service=name,
        )

    def _capture(self, connect: Connect) -> str | None:
        from sandbox.services.base import CreatedByClient
        from sandbox.services.registry import get_kind
        from sandbox.services.statecapture import begin_service_capture

        taken = {s.name for s in self.writer.manifest.services}
        name = connect.kind
        n = 1
        while name in taken:
            n += 1
            name = f"{connect.kind}-{n}"
        env = next(
            (k for k, v in sorted(self._environ.items()) if connect.given and v == connect.given),
            None,
        )
        address = address_of(connect.kind, connect.endpoint)
        self._capturing.add(address)
        try:
            kind = get_kind(connect.kind)
            if isinstance(kind, CreatedByClient):  # the agent's connect creates it anyway
                kind.create_missing(connect.endpoint)
            mask = self.redactor.config.mask_for(name, connect.kind)
            state, pinned = begin_service_capture(
                connect.kind,
                name,
                connect.endpoint,
                self.store,
                env,
                state=self.state,
                **self._masking(mask),
            )
        except SandboxError:
            return None  # not captured: replay refuses a connection to it
        finally:
            self._capturing.discard(address)
        binding = state.binding.model_copy(update={"value": self._redacted(connect.endpoint)})
        self.endpoints[name] = connect.endpoint
        if pinned is not None:
            self._pins[name] = pinned
        manifest = self.writer.manifest
        services = [*manifest.services, state.model_copy(update={"binding": binding})]
        self.writer.update_manifest(manifest.model_copy(update={"services": services}))
        return name

    def _masking(self, mask: Mapping[str, str]) -> dict[str, Any]:
        return {"mask": mask, "key": self.store.placeholder_key()} if mask else {}

    def _redacted(self, endpoint: str) -> str:
        from sandbox.services.statecapture import redact_endpoint

        return self.redactor.text(redact_endpoint(endpoint))

    def _save(self) -> None:
        manifest = self.writer.manifest
        touched = list(self._touched.values())
        self.writer.update_manifest(manifest.model_copy(update={"touched": touched}))

    @property
    def holds_pins(self) -> bool:
        """Whether a state is held since a first connection (its end state is dumped)."""
        return bool(self._pins)

    def release(self) -> None:
        """Let go of the states held since the first connection, capturing nothing (a run
        that is not kept, or damaged)."""
        pins, self._pins = self._pins, {}
        for pinned in pins.values():
            with contextlib.suppress(Exception):
                pinned.close()

    def end_observing(self) -> None:
        """The run is over: the states held since the first connection stop observing its
        context (they stay held for :meth:`end_states`)."""
        from sandbox.services.base import run_bound

        for pinned in self._pins.values():
            bound = run_bound(pinned)
            if bound is not None:
                with contextlib.suppress(Exception):
                    bound.unbind()

    def end_states(self) -> list[ServiceState]:
        """The manifest's services with the end state of each one found and captured."""
        from sandbox.services.statecapture import capture_end_state

        out = []
        for state in self.writer.manifest.services:
            endpoint = self.endpoints.get(state.name)
            if endpoint is not None and state.after is None:
                mask = self.redactor.config.mask_for(state.name, state.kind)
                pinned = self._pins.pop(state.name, None)
                state = capture_end_state(
                    state, endpoint, self.store, pinned=pinned, **self._masking(mask)
                )
            out.append(state)
        return out


_routers: dict[int, Discovery] = {}
"""``id`` of the boundary (the run) whose connections it records -> its discovery."""


def _route_to_run(connect: Connect) -> str:
    """A connection goes to the discovery of the run whose context opens it; outside any
    run it passes unseen."""
    router = _routers.get(id(boundary.current()))
    return connect.endpoint if router is None else router(connect)


_CLIENTS = Shared(lambda: install_clients(_route_to_run))
