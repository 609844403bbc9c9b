"""Capture a service into a snapshot store: the dump becomes a blob, the manifest gets a
:class:`~sandbox.snapshot.manifest.ServiceState` with its version, hash and binding.

A capture takes the whole state (``"whole"``, the default) or only what the run touched
(``"touched"``): then :func:`capture_service` pins the state before the run and returns the
hold with the service, and :func:`capture_end_state` takes both states from it when the run
is over. A kind that cannot (:class:`~sandbox.services.base.TouchedCapture`) is captured
whole, its meta says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast
from urllib.parse import urlsplit, urlunsplit

from sandbox.services.base import CapturedState, PinnedState, TouchedCapture, provides
from sandbox.services.registry import get_kind, kinds
from sandbox.snapshot.manifest import Binding, ServiceState
from sandbox.snapshot.store import Store

REDACTED = "***"


def redact_endpoint(endpoint: str) -> str:
    """The endpoint with any password replaced by ``***`` (paths are returned as they are)."""
    if "://" not in endpoint:
        return endpoint
    parts = urlsplit(endpoint)
    if parts.password is None:
        return endpoint
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{host}"))


def _masked(
    kind: str, endpoint: str, state: CapturedState, mask: Mapping[str, str] | None, key: bytes
) -> CapturedState:
    if not mask:
        return state
    from sandbox.services.masking import mask_captured

    return mask_captured(kind, endpoint, state, mask, key)


def _capture(kind: str, endpoint: str, mask: Mapping[str, str] | None, key: bytes) -> CapturedState:
    if mask:
        from sandbox.services.masking import capture_masked

        return capture_masked(kind, endpoint, mask, key)
    return get_kind(kind).capture(endpoint)


def pin_service(kind: str, endpoint: str) -> PinnedState | None:
    """Hold the state behind ``endpoint`` for a touched capture; ``None`` when the kind
    cannot."""
    found = get_kind(kind)
    return cast(TouchedCapture, found).pin(endpoint) if provides(found, TouchedCapture) else None


def capture_service(
    kind: str,
    name: str,
    endpoint: str,
    store: Store,
    binding_env: str | None = None,
    *,
    image: str | None = None,
    mask: Mapping[str, str] | None = None,
    key: bytes = b"",
) -> ServiceState:
    """Capture the state behind ``endpoint`` as the restore point (``before``) of service
    ``name``, with the masking rules ``mask`` applied. The binding records ``binding_env``
    and the endpoint, its password redacted."""
    state = _capture(kind, endpoint, mask, key)
    ref = store.put_blob(state.data, state.media_type)
    return ServiceState(
        name=name,
        kind=kind,
        binding=Binding(env=binding_env, value=redact_endpoint(endpoint)),
        version=state.version,
        image=image,
        before=ref,
        hash_before=state.state_hash,
        meta=dict(state.meta),
    )


def begin_service_capture(
    kind: str,
    name: str,
    endpoint: str,
    store: Store,
    binding_env: str | None = None,
    *,
    mask: Mapping[str, str] | None = None,
    key: bytes = b"",
    state: str = "whole",
) -> tuple[ServiceState, PinnedState | None]:
    """:func:`capture_service`, or with ``state="touched"`` the state pinned instead where the
    kind can: the hold is returned with the service, and :func:`capture_end_state` fills
    ``before`` from it."""
    pinned = pin_service(kind, endpoint) if state == "touched" else None
    if pinned is not None:
        binding = Binding(env=binding_env, value=redact_endpoint(endpoint))
        service = ServiceState(name=name, kind=kind, binding=binding, meta={"state": "touched"})
        return service, pinned
    service = capture_service(kind, name, endpoint, store, binding_env, mask=mask, key=key)
    if state == "touched":
        able = ", ".join(n for n, k in kinds().items() if isinstance(k, TouchedCapture))
        note = f"the {kind} kind captures its whole state (touched: {able or 'no kind'})"
        service = service.model_copy(update={"meta": {**service.meta, "note": note}})
    return service, None


def capture_end_state(
    service: ServiceState,
    endpoint: str,
    store: Store,
    *,
    mask: Mapping[str, str] | None = None,
    key: bytes = b"",
    pinned: PinnedState | None = None,
) -> ServiceState:
    """Capture the end state (``after``, ``hash_after``) of a service captured before, with
    the masking rules ``mask`` applied (see :mod:`sandbox.services.masking`); for a pinned
    one, its state before the run too (``before``, ``hash_before``)."""
    if pinned is None:
        state = _capture(service.kind, endpoint, mask, key)
        ref = store.put_blob(state.data, state.media_type)
        return service.model_copy(update={"after": ref, "hash_after": state.state_hash})
    before, after = (_masked(service.kind, endpoint, s, mask, key) for s in pinned.finish())
    return service.model_copy(
        update={
            "version": before.version,
            "before": store.put_blob(before.data, before.media_type),
            "hash_before": before.state_hash,
            "after": store.put_blob(after.data, after.media_type),
            "hash_after": after.state_hash,
            "meta": dict(before.meta),
        }
    )
