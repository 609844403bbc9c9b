"""Shared fixtures. Tests marked ``docker`` skip without an engine, and fail in CI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox.snapshot.store import DirectoryStore

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


@pytest.fixture(autouse=True)
def _fresh_program_start() -> Iterator[None]:
    """Each test is a program of its own: the environment reads noted outside any run (an
    agent's settings read at import, see :mod:`sandbox.capture.envreads`) by an earlier test
    module are not this test's."""
    from sandbox.capture import envreads

    if envreads._outside is not None:
        envreads._outside.clear()
    envreads._later.clear()
    yield


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
        for item in items:  # first, before the module fixtures that start containers
            if item.get_closest_marker("docker") and isinstance(item, pytest.Function):
                item.fixturenames.insert(0, "sandbox_images")
        return
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise pytest.UsageError(f"CI=true and tests need Docker, but {problem}")
    skip = pytest.mark.skip(reason=f"needs Docker: {problem}")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def sandbox_images(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Docker tests run against locally built images: the missing ones are built once, when
    the first test that needs Docker runs (never while tests are being collected), by one
    test session at a time (another one that needs them waits for the one that builds)."""
    import fcntl

    from sandbox.containers import build_images

    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")

    def progress(line: str) -> None:
        if reporter is not None and "building" in line.lower():
            reporter.write_line(f"images: {line}")

    # the folder above the session's own temporary folder: the user's, which sessions share
    shared = tmp_path_factory.getbasetemp().parent
    with open(shared / "sandbox-images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for result in build_images(["postgres", "redis"], progress=progress):
            if reporter is not None:
                reporter.write_line(f"images: {result.describe()}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DirectoryStore]:
    yield DirectoryStore(tmp_path / "store")


@dataclass
class S3Server:
    """moto's S3 server started by the tests (``tests/s3_server.py``), and its request log."""

    endpoint: str
    log: Path

    def requests(self) -> list[str]:
        """``METHOD PATH`` of every request answered so far (held ones start with HELD)."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def puts(self, suffix: str = "") -> list[str]:
        return [r for r in self.requests() if r.startswith("PUT ") and r.endswith(suffix)]

    def hold(self, suffix: str, method: str = "") -> None:
        """Hold every request (of ``method`` only, when given) whose path ends with ``suffix``
        (an outage) until :meth:`release`."""
        Path(f"{self.log}.hold").write_text(f"{method} {suffix}")

    def release(self) -> None:
        Path(f"{self.log}.hold").unlink(missing_ok=True)

    def down(self, down: bool = True) -> None:
        """Refuse every request with 503 at once (an outage) until ``down(False)``."""
        if down:
            Path(f"{self.log}.down").write_text("")
        else:
            Path(f"{self.log}.down").unlink(missing_ok=True)

    def env(self) -> dict[str, str]:
        """boto3's usual variables pointing at this server."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One moto S3 server for the session, on a free local port."""
    folder = tmp_path_factory.mktemp("s3")
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("s3_server.py")),
            str(port),
            str(folder / "requests.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("moto's S3 server did not start")
    try:
        yield endpoint, folder
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def s3(s3_process: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """The session's S3 server with boto3's variables set, a log of this test's requests only
    and no held requests."""
    endpoint, folder = s3_process
    log = folder / "requests.log"
    log.write_text("")
    server = S3Server(endpoint, log)
    server.release()
    server.down(False)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    yield server
    server.release()
    server.down(False)


@pytest.fixture
def s3_url(s3: S3Server) -> str:
    """A fresh bucket on the test S3 server, as a store URL with a prefix."""
    import boto3

    bucket = f"b-{uuid.uuid4().hex[:12]}"
    boto3.session.Session().client("s3").create_bucket(Bucket=bucket)
    s3.log.write_text("")
    return f"s3://{bucket}/team/sandbox"


REPO = Path(__file__).resolve().parents[1]


def _committed_files(folder: str) -> list[str] | None:
    """The files of ``folder`` (relative to the repository) that git tracks, or ``None`` when
    this is no git checkout."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--", folder],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in done.stdout.decode().split("\0") if name]


@pytest.fixture
def committed_snapshots(tmp_path: Path) -> Path:
    """A copy of what the repository ships in ``snapshots/`` (the files git tracks), never
    what earlier commands left there (``make demo``, a capture into the default store):
    replays write runs into the copy, and the working tree stays as it was."""
    copy = tmp_path / "snapshots"
    tracked = _committed_files("snapshots")
    if tracked is None:
        import shutil

        shutil.copytree(REPO / "snapshots", copy, ignore=shutil.ignore_patterns(".tmp"))
        return copy
    for name in tracked:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((REPO / name).read_bytes())
    copy.mkdir(exist_ok=True)
    return copy
