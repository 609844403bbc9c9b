"""The images the sandbox runs, and how to build them with no registry.

``base`` is a Debian bookworm tree made by ``images/build-base.sh`` (debootstrap and
``docker import``); the image of each service kind (its
:class:`~sandbox.services.descriptor.ImageBuild`) and ``runner`` are built ``FROM`` it. With a
registry at hand, ``base="debian:bookworm-slim"`` builds the others from the usual image and
skips the local base. Every built image carries a hash of its build context in a label, so a
changed Dockerfile (or, for the runner, changed project code) is rebuilt on the next build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sandbox.containers.engine import DockerClient, Progress, connect, no_progress
from sandbox.containers.labels import CONTEXT_HASH
from sandbox.errors import ImageBuildError, SandboxError, UnknownNameError
from sandbox.names import BASE_ENV
from sandbox.seam import llm
from sandbox.services.registry import kinds

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = REPO_ROOT / "images"
DEFAULT_BASE = "sandbox-replayer/base:bookworm"


@dataclass(frozen=True)
class ImageDef:
    name: str
    tag: str
    folder: str
    """Folder under ``images/`` holding the Dockerfile (or the base build script)."""


def _kind_images() -> list[ImageDef]:
    """The images the registered service kinds build (:class:`ImageBuild`), in their order."""
    found: dict[str, ImageDef] = {}
    for kind in kinds().values():
        spec = kind.container
        if spec is not None and spec.build is not None:
            found.setdefault(spec.image, ImageDef(spec.image, spec.build.tag, spec.build.folder))
    return list(found.values())


IMAGES: dict[str, ImageDef] = {
    d.name: d
    for d in (
        ImageDef("base", DEFAULT_BASE, "."),
        *_kind_images(),
        ImageDef("runner", "sandbox-replayer/runner:latest", "runner"),
    )
}
BUILD_ORDER = list(IMAGES)


def required_images() -> list[str]:
    """The service images the demos and CI need (the others belong to optional kinds)."""
    return [
        k.container.image
        for k in kinds().values()
        if k.container is not None and k.container.build is not None and k.container.build.required
    ]


def faketime_images() -> list[str]:
    """The images whose clock a sandbox freezes with libfaketime (the runner's too)."""
    found = [
        k.container.image
        for k in kinds().values()
        if k.container is not None and k.container.build is not None and k.container.faketime
    ]
    return [*found, "runner"]


def image_tag(name: str) -> str:
    return _image_def(name).tag


def _image_def(name: str) -> ImageDef:
    try:
        return IMAGES[name]
    except KeyError:
        raise UnknownNameError("image", name, list(IMAGES)) from None


@dataclass(frozen=True)
class ImageStatus:
    name: str
    tag: str
    present: bool
    state: Literal["current", "stale", "unlabelled", "missing"]
    """``stale``: built from another context than the one in this checkout."""
    image_id: str | None = None
    size: int | None = None
    created: str | None = None


@dataclass(frozen=True)
class BuildResult:
    name: str
    tag: str
    action: Literal["built", "rebuilt", "present"]
    seconds: float = 0.0
    why: Literal["", "missing", "forced", "context changed"] = ""
    """Why it was built: missing, ``--force``, or its build context changed."""

    def describe(self) -> str:
        """One line: ``postgres: sandbox-replayer/postgres:15 rebuilt in 41 s because its
        build context changed``."""
        if self.action == "present":
            return f"{self.name}: {self.tag} present"
        because = {"forced": " (forced)", "context changed": " because its build context changed"}
        return (
            f"{self.name}: {self.tag} {self.action} in {self.seconds:.0f} s"
            f"{because.get(self.why, '')}"
        )


# --- build contexts --------------------------------------------------------------------------


def _hash_tree(root: Path, base: str) -> str:
    digest = hashlib.sha256(f"base={base}\n".encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        executable = os.access(path, os.X_OK)
        digest.update(f"{rel}\0{int(executable)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _copy_source(dest: Path) -> None:
    """Copy what ``pip install`` needs to install this project: no caches, no tests."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache")
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        if (REPO_ROOT / name).is_file():
            shutil.copy2(REPO_ROOT / name, dest / name)
    for package in ("sandbox", "cli"):
        shutil.copytree(REPO_ROOT / package, dest / package, ignore=ignore)


_RUNNER_EXTRA_REQUIREMENTS = ["async-timeout>=4.0.3"]
"""Dependencies the runner's interpreter needs that the host may not: pip evaluates
environment markers against the interpreter running it, and redis' ``python_full_version <
"3.11.3"`` marker holds for Debian bookworm's 3.11.2."""


_RUNNER_LLM_CLIENTS = tuple(dist for dist, _ in llm.client_packages())
"""The model clients capture records without changes to the agent (the SDKs of the model
APIs): an agent replayed in the runner imports them as it did when captured (their pins come
from the ``dev`` extra)."""


def _runner_requirements() -> str:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    clients = [
        dep
        for dep in project.get("optional-dependencies", {}).get("dev", [])
        if re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0] in _RUNNER_LLM_CLIENTS
    ]
    deps = [*project.get("dependencies", []), *clients, *_RUNNER_EXTRA_REQUIREMENTS]
    return "".join(f"{dep}\n" for dep in deps)


_WHEEL_TARGET = [
    "--only-binary=:all:",
    "--python-version=3.11.2",
    "--implementation=cp",
    "--abi=cp311",
    *(
        f"--platform={p}"
        for p in ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
    ),
    "--platform=linux_x86_64",
]
"""Wheels for the runner image's interpreter (Debian bookworm's CPython 3.11.2 on x86_64),
whatever Python runs the build."""


class _Context:
    """A build context folder: the image's folder, or for the runner one assembled in a
    temporary folder (removed on close).

    The runner's hash covers its Dockerfile, its dependency list and the project source, not
    the wheels (a wheel's bytes change with every build); :meth:`prepare` fetches the wheels
    with the host's pip and its configuration, so that the image build needs no index.
    """

    def __init__(self, image: ImageDef, base: str) -> None:
        self._tmp: Path | None = None
        source = IMAGES_DIR / image.folder
        if not (source / "Dockerfile").is_file():
            raise SandboxError(
                f"no Dockerfile for image {image.name} in {source}: build images from a source "
                "checkout of sandbox-replayer"
            )
        if image.name == "runner":
            self._tmp = Path(tempfile.mkdtemp(prefix="sandbox-runner-ctx-"))
            shutil.copy2(source / "Dockerfile", self._tmp / "Dockerfile")
            deps = self._tmp / "wheels" / "deps"
            deps.mkdir(parents=True)
            (deps / "requirements.txt").write_text(_runner_requirements())
            _copy_source(self._tmp / "src")
            self.path = self._tmp
        else:
            self.path = source
        self.hash = _hash_tree(self.path, base)

    def prepare(self, progress: Progress) -> None:
        if self._tmp is None:
            return
        wheels = self._tmp / "wheels"
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        progress("runner: fetching dependency wheels with pip")
        _run(
            [
                *pip,
                "download",
                "--quiet",
                "--dest",
                str(wheels / "deps"),
                *_WHEEL_TARGET,
                "--requirement",
                str(wheels / "deps" / "requirements.txt"),
            ],
            "fetching the runner's dependency wheels",
        )
        progress("runner: building the sandbox-replayer wheel")
        _run(
            [
                *pip,
                "wheel",
                "--quiet",
                "--no-deps",
                "--wheel-dir",
                str(wheels / "app"),
                str(self._tmp / "src"),
            ],
            "building the sandbox-replayer wheel",
        )
        shutil.rmtree(self._tmp / "src")

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise ImageBuildError(f"{what} failed (exit {proc.returncode}):\n{tail}")


# --- listing ---------------------------------------------------------------------------------


def _inspect(client: DockerClient, tag: str) -> Any | None:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def list_images(
    base: str | None = None,
    client: DockerClient | None = None,
    tags: Mapping[str, str] | None = None,
) -> list[ImageStatus]:
    """Each image the sandbox knows, whether it is built, and whether it is current.

    ``tags`` looks for some images under other tags (name -> tag), e.g. a copy being checked.
    """
    base = base or os.environ.get(BASE_ENV) or DEFAULT_BASE
    client = client or connect()
    out = []
    for name in BUILD_ORDER:
        image = IMAGES[name]
        tag = (tags or {}).get(name, image.tag)
        found = _inspect(client, tag)
        if found is None:
            out.append(ImageStatus(name, tag, False, "missing"))
            continue
        label = (found.labels or {}).get(CONTEXT_HASH)
        if name == "base" or label is None:
            state: Literal["current", "stale", "unlabelled"] = "unlabelled"
            if name == "base":
                state = "current"
        else:
            ctx = _Context(image, base)
            try:
                state = "current" if label == ctx.hash else "stale"
            finally:
                ctx.close()
        attrs = found.attrs
        out.append(
            ImageStatus(
                name,
                tag,
                True,
                state,
                image_id=str(found.short_id).removeprefix("sha256:"),
                size=attrs.get("Size"),
                created=attrs.get("Created"),
            )
        )
    return out


# --- building --------------------------------------------------------------------------------


def build_images(
    names: Sequence[str] | None = None,
    *,
    progress: Progress = no_progress,
    force: bool = False,
    base: str | None = None,
    client: DockerClient | None = None,
    on_result: Callable[[BuildResult], None] | None = None,
) -> list[BuildResult]:
    """Build the images that are missing (all by default), streaming output to ``progress``;
    ``on_result`` hears of each image once, as soon as it is present or built.

    An image already present is kept unless ``force``, or unless it carries a context hash
    that differs from this checkout's (its Dockerfile or, for the runner, the project
    changed). ``base`` (or ``$SANDBOX_BASE_IMAGE``) names the image the others build from;
    the local base is built first, with ``images/build-base.sh``, when it is needed and
    missing.
    """
    import time

    base = base or os.environ.get(BASE_ENV) or DEFAULT_BASE
    wanted = list(dict.fromkeys(names)) if names else list(BUILD_ORDER)
    for name in wanted:
        _image_def(name)
    client = client or connect(timeout=900)
    results: list[BuildResult] = []

    def done(result: BuildResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    needs_base = any(n != "base" for n in wanted) and base == DEFAULT_BASE
    if "base" in wanted or needs_base:
        start = time.monotonic()
        missing = _inspect(client, DEFAULT_BASE) is None
        if missing or ("base" in wanted and force):
            _build_base(client, progress, force="base" in wanted and force)
            seconds = time.monotonic() - start
            done(
                BuildResult(
                    "base", DEFAULT_BASE, "built", seconds, "missing" if missing else "forced"
                )
            )
        elif "base" in wanted:
            done(BuildResult("base", DEFAULT_BASE, "present"))
    for name in [n for n in BUILD_ORDER if n in wanted and n != "base"]:
        image = IMAGES[name]
        ctx = _Context(image, base)
        try:
            found = _inspect(client, image.tag)
            label = None if found is None else (found.labels or {}).get(CONTEXT_HASH)
            stale = label is not None and label != ctx.hash
            if found is not None and not force and not stale:
                done(BuildResult(name, image.tag, "present"))
                continue
            why: Literal["missing", "forced", "context changed"] = (
                "missing" if found is None else ("forced" if force else "context changed")
            )
            progress(f"{name}: building {image.tag} ({why})")
            start = time.monotonic()
            ctx.prepare(progress)
            _docker_build(client, image, ctx, base, progress)
            action: Literal["built", "rebuilt"] = "built" if found is None else "rebuilt"
            done(BuildResult(name, image.tag, action, time.monotonic() - start, why))
        finally:
            ctx.close()
    return results


def _docker_build(
    client: DockerClient, image: ImageDef, ctx: _Context, base: str, progress: Progress
) -> None:
    tail: deque[str] = deque(maxlen=20)
    stream: Iterator[dict[str, Any]] = client.api.build(
        path=str(ctx.path),
        tag=image.tag,
        buildargs={"BASE": base},
        labels={CONTEXT_HASH: ctx.hash},
        rm=True,
        forcerm=True,
        decode=True,
        pull=False,
    )
    for chunk in stream:
        if "error" in chunk:
            detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
            lines = "\n".join(tail)
            raise ImageBuildError(
                f"building {image.tag} from images/{image.folder} failed: {detail.strip()}\n"
                f"last build output:\n{lines}"
            )
        text = chunk.get("stream")
        if isinstance(text, str):
            for line in text.splitlines():
                if line.strip():
                    tail.append(line.rstrip())
                    progress(f"{image.name}: {line.rstrip()}")


def _build_base(client: DockerClient, progress: Progress, force: bool) -> None:
    script = IMAGES_DIR / "build-base.sh"
    if not script.is_file():
        raise SandboxError(f"{script} is missing: build images from a source checkout")
    if os.geteuid() != 0:
        raise ImageBuildError(
            f"building {DEFAULT_BASE} needs root (debootstrap): run `sudo make images`; with a "
            "registry at hand, `sandbox images build --base debian:bookworm-slim` skips it"
        )
    if force:
        client.images.remove(DEFAULT_BASE, force=True)
    tail: deque[str] = deque(maxlen=20)
    proc = subprocess.Popen(
        ["bash", str(script), DEFAULT_BASE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        tail.append(line.rstrip())
        progress(f"base: {line.rstrip()}")
    if proc.wait() != 0:
        lines = "\n".join(tail)
        raise ImageBuildError(f"images/build-base.sh failed (exit {proc.returncode}):\n{lines}")
