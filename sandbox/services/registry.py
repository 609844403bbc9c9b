"""Service kinds by name: the built-in ones (registered when their modules are imported, here)
and any other a caller registers with :func:`sandbox.services.base.register`."""

from __future__ import annotations

from collections.abc import Mapping

from sandbox.errors import UnknownNameError
from sandbox.services import files, postgres, redis, sqlite  # noqa: F401  (register the kinds)
from sandbox.services.base import ServiceKind, registered


def get_kind(name: str) -> ServiceKind:
    try:
        return registered()[name]
    except KeyError:
        raise UnknownNameError("service kind", name, list(registered())) from None


def kinds() -> Mapping[str, ServiceKind]:
    """Every registered kind by name, the built-in ones included."""
    return registered()


def kind_names() -> list[str]:
    return sorted(registered())
