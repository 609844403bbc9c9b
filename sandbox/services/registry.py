"""Service kinds by name: the built-in ones (registered when their modules are imported, here)
and any other a caller registers with :func:`sandbox.services.base.register`."""

from __future__ import annotations

from sandbox.errors import UnknownNameError
from sandbox.services import files, postgres, redis, sqlite  # noqa: F401  (register the kinds)
from sandbox.services.base import ServiceKind, registered


def get_kind(name: str) -> ServiceKind:
    try:
        return registered()[name]
    except KeyError:
        raise UnknownNameError("service kind", name, list(registered())) from None


def kind_names() -> list[str]:
    return sorted(registered())
