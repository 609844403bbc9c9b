"""Service kinds: capture, restore and hash tool-side state (one module per kind)."""

from sandbox.services.base import CapturedState, ServiceKind, get_kind, kind_names, register

__all__ = ["CapturedState", "ServiceKind", "get_kind", "kind_names", "register"]
