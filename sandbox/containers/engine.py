"""The connection to the Docker engine, with errors a person can act on."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sandbox.errors import DockerUnavailableError, ImageMissingError

DockerClient = Any
"""``docker.DockerClient`` (the docker SDK ships no type information)."""

Progress = Callable[[str], None]
"""Receives one human-readable line at a time; the library never prints."""


def no_progress(_line: str) -> None:
    pass


MAKE_IMAGES_HINT = "run `make images` (or `sandbox images build`)"


def connect(timeout: int = 30) -> DockerClient:
    """A client for the engine named by ``DOCKER_HOST`` (or the default socket), checked with
    a ping; :class:`DockerUnavailableError` when nothing answers."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        where = os.environ.get("DOCKER_HOST") or "the default socket"
        raise DockerUnavailableError(
            f"no Docker engine answers at {where} ({type(exc).__name__}: {exc}); start one "
            "(`sudo dockerd &`, or `sudo systemctl start docker`), or set DOCKER_HOST; "
            "as root on Debian, images/provision-docker.sh installs and starts one"
        ) from None
    return client


def require_image(client: DockerClient, image: str) -> None:
    """Raise :class:`ImageMissingError` naming the fix when ``image`` is not built here."""
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise ImageMissingError(
            f"image {image} is not built on this machine: {MAKE_IMAGES_HINT}; images cannot be "
            "pulled here, they are built locally from images/"
        ) from None


def put_file(client: DockerClient, container: Any, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` inside a running ``container`` (a tmpfs too, which the
    archive API cannot reach), through ``cat`` in an exec whose standard input it is; the
    file appears whole (written beside, then renamed)."""
    import socket

    from sandbox.errors import SandboxError

    script = 'cat > "$0.part" && mv "$0.part" "$0"'
    exec_id = client.api.exec_create(container.id, ["sh", "-c", script, path], stdin=True)["Id"]
    stream = client.api.exec_start(exec_id, socket=True)
    raw = getattr(stream, "_sock", stream)  # the docker SDK wraps the socket it returns
    output = bytearray()
    try:
        raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)
        while chunk := raw.recv(1 << 16):
            output += chunk
    finally:
        stream.close()
    code = client.api.exec_inspect(exec_id).get("ExitCode")
    if code != 0:
        said = bytes(output).decode(errors="replace").strip()[-300:]
        raise SandboxError(f"could not write {path} in container {container.name}: {said}")
