"""How each service kind runs in the sandbox, read from the kind's own descriptor
(:mod:`sandbox.services.descriptor`): a server kind declares its :class:`ContainerSpec`
(image, port, user, limits, readiness), a kind on a path its :class:`KindBinding`. Adding a kind
touches its own module only.
"""

from __future__ import annotations

import re

from sandbox.containers.images import image_tag
from sandbox.errors import UnknownNameError
from sandbox.services.descriptor import ContainerSpec
from sandbox.services.registry import get_kind, kinds

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
"""Where Debian's libfaketime package puts the library in every sandbox image."""


def container_spec(kind: str) -> ContainerSpec:
    """The container a server kind runs in (:class:`UnknownNameError` for another kind)."""
    spec = get_kind(kind).container
    if spec is None:
        raise UnknownNameError("container service kind", kind, server_kinds())
    return spec


def server_kinds() -> list[str]:
    """The registered kinds that run in a container."""
    return sorted(name for name, kind in kinds().items() if kind.container is not None)


def is_path_kind(kind: str) -> bool:
    """Whether ``kind`` is restored into a file or folder of the environment (no container)."""
    return get_kind(kind).binding.path is not None


def spec_image_tag(spec: ContainerSpec) -> str:
    return image_tag(spec.image)


def major_version(version: str | None) -> int | None:
    """``"15.18"``, ``"PostgreSQL 15.4 (Debian ...)"``, ``"7.0.15"`` -> 15, 15, 7."""
    if not version:
        return None
    found = re.search(r"(\d+)(?:\.\d+)*", version)
    return int(found.group(1)) if found else None
