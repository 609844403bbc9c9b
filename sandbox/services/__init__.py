"""Service kinds: capture, restore and hash tool-side state (one module per kind)."""

from sandbox.services.base import CapturedState, ServiceKind, register
from sandbox.services.capture import capture_end_state, capture_service
from sandbox.services.registry import get_kind, kind_names

__all__ = [
    "CapturedState",
    "ServiceKind",
    "capture_end_state",
    "capture_service",
    "get_kind",
    "kind_names",
    "register",
]
