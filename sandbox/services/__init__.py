"""Service kinds: capture, restore and hash tool-side state (one module per kind)."""

from sandbox.services import files, postgres, redis, sqlite  # noqa: F401  (register the kinds)
from sandbox.services.base import CapturedState, ServiceKind, get_kind, kind_names, register
from sandbox.services.capture import capture_end_state, capture_service

__all__ = [
    "CapturedState",
    "ServiceKind",
    "capture_end_state",
    "capture_service",
    "get_kind",
    "kind_names",
    "register",
]
