"""Capture a service into a snapshot store: the dump becomes a blob, the manifest gets a
:class:`~sandbox.snapshot.manifest.ServiceState` with its version, hash and binding."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from sandbox.services.base import CapturedState
from sandbox.services.registry import get_kind
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


def _capture(kind: str, endpoint: str, mask: Mapping[str, str] | None, key: bytes) -> CapturedState:
    if mask:
        from sandbox.services.masking import capture_masked

        return capture_masked(kind, endpoint, mask, key)
    return get_kind(kind).capture(endpoint)


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


def capture_end_state(
    service: ServiceState,
    endpoint: str,
    store: Store,
    *,
    mask: Mapping[str, str] | None = None,
    key: bytes = b"",
) -> ServiceState:
    """Capture the end state (``after``, ``hash_after``) of a service captured before, with
    the masking rules ``mask`` applied (see :mod:`sandbox.services.masking`)."""
    state = _capture(service.kind, endpoint, mask, key)
    ref = store.put_blob(state.data, state.media_type)
    return service.model_copy(update={"after": ref, "hash_after": state.state_hash})
