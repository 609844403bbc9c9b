"""Shared fixtures. Tests marked ``docker`` skip without an engine, and fail in CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.snapshot.store import DirectoryStore

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


def _docker_problem() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("docker") for item in items):
        return
    problem = _docker_problem()
    if problem is None:
        _build_missing_images(config)
        return
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise pytest.UsageError(f"CI=true and tests need Docker, but {problem}")
    skip = pytest.mark.skip(reason=f"needs Docker: {problem}")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


def _build_missing_images(config: pytest.Config) -> None:
    """Docker tests run against locally built images: build the missing ones once, first."""
    from sandbox.containers import build_images

    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def progress(line: str) -> None:
        if reporter is not None and "building" in line.lower():
            reporter.write_line(f"images: {line}")

    for result in build_images(["postgres", "redis"], progress=progress):
        if reporter is not None:
            reporter.write_line(f"images: {result.describe()}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DirectoryStore]:
    yield DirectoryStore(tmp_path / "store")
