"""Service kinds: capture, restore and hash tool-side state (one module per kind)."""

from sandbox.services.base import CapturedState, ServiceKind, register
from sandbox.services.registry import get_kind, kind_names
from sandbox.services.statecapture import capture_end_state, capture_service

__all__ = [
    "CapturedState",
    "ServiceKind",
    "capture_end_state",
    "capture_service",
    "get_kind",
    "kind_names",
    "register",
]
