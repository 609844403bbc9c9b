"""The container sandbox: images, bring-up on an internal network, labels and cleanup.

Public API::

    build_images(names, progress=..., force=False)   # build what is missing, with no registry
    list_images()                                    # what is built, what is stale
    bring_up(services, store, frozen_at) -> Environment   # a context manager
    Environment.env / .services / .reset() / .close()
    gc(all=False)                                    # remove what dead sessions left
"""

from sandbox.containers.bringup import (
    Environment,
    RestoreSpec,
    ServiceEndpoint,
    bring_up,
    faketime_env,
)
from sandbox.containers.engine import Progress, connect
from sandbox.containers.gc import GcReport, gc
from sandbox.containers.images import (
    IMAGES,
    BuildResult,
    ImageStatus,
    build_images,
    image_tag,
    list_images,
)
from sandbox.containers.labels import MANAGED, PID, SESSION, Owner
from sandbox.containers.specs import container_spec, server_kinds
from sandbox.services.descriptor import ContainerSpec

__all__ = [
    "IMAGES",
    "MANAGED",
    "PID",
    "SESSION",
    "BuildResult",
    "ContainerSpec",
    "Environment",
    "GcReport",
    "ImageStatus",
    "Owner",
    "Progress",
    "RestoreSpec",
    "ServiceEndpoint",
    "bring_up",
    "build_images",
    "connect",
    "container_spec",
    "faketime_env",
    "gc",
    "image_tag",
    "list_images",
    "server_kinds",
]
