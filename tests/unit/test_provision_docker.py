"""The engine provisioning step (images/provision-docker.sh): its decision and the commands
it would run, and that CI and the Makefile both go through it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "images" / "provision-docker.sh"
NOWHERE = "unix:///nonexistent-sandbox-test/docker.sock"
IS_ROOT = os.geteuid() == 0


def _provision(
    *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [*prefix, str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=60
    )


def _runs(out: str) -> list[str]:
    return [line.removeprefix("run: ") for line in out.splitlines() if line.startswith("run: ")]


def _path_with_dockerd(tmp_path: Path, present: bool) -> str:
    """PATH with a ``dockerd`` put first, or with every folder holding one left out."""
    folders = [d for d in os.environ["PATH"].split(os.pathsep) if d]
    folders = [d for d in folders if not (Path(d) / "dockerd").exists()]
    if present:
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "dockerd").write_text("#!/bin/sh\nexit 1\n")  # only probed, never run here
        (fake / "dockerd").chmod(0o755)
        folders.insert(0, str(fake))
    return os.pathsep.join(folders)


def _debian_release(tmp_path: Path, id_: str = "debian", id_like: str = "") -> str:
    path = tmp_path / "os-release"
    path.write_text(f'ID={id_}\nID_LIKE="{id_like}"\n')
    return str(path)


@pytest.mark.docker
def test_engine_answers_nothing_is_run() -> None:
    """An engine answers: the dry run says so and plans nothing; a real run is silent."""
    dry = _provision("--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("decision: engine-answers (Docker ")
    assert _runs(dry.stdout) == []
    real = _provision()
    assert (real.returncode, real.stdout, real.stderr) == (0, "", "")


@pytest.mark.skipif(not IS_ROOT, reason="the provision branch is taken as root only")
@pytest.mark.parametrize("dockerd_present", [False, True], ids=["no-dockerd", "dockerd"])
def test_root_on_debian_without_engine_installs_and_starts(
    tmp_path: Path, dockerd_present: bool
) -> None:
    """Root on Debian, nothing answers at DOCKER_HOST: install docker.io when dockerd is
    missing, start dockerd on that socket, wait."""
    env = {
        "DOCKER_HOST": NOWHERE,
        "PATH": _path_with_dockerd(tmp_path, dockerd_present),
        "SANDBOX_OS_RELEASE": _debian_release(tmp_path),
        "TMPDIR": str(tmp_path),
    }
    if shutil.which("apt-get", path=env["PATH"]) is None:
        pytest.skip("apt-get is not installed here")
    result = _provision("--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "decision: provision (root on a Debian-like system)"
    install = [
        "apt-get update -qq",
        "env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io",
    ]
    start = [
        f"nohup dockerd -H {NOWHERE} >{tmp_path}/sandbox-dockerd.log 2>&1 &",
        "wait up to 60 s until docker info answers",
    ]
    assert _runs(result.stdout) == ([] if dockerd_present else install) + start


@pytest.mark.skipif(not IS_ROOT, reason="the provision branch is taken as root only")
def test_ubuntu_counts_as_debian_like(tmp_path: Path) -> None:
    """``ID_LIKE=debian`` is Debian-like."""
    env = {
        "DOCKER_HOST": NOWHERE,
        "SANDBOX_OS_RELEASE": _debian_release(tmp_path, "ubuntu", "debian"),
    }
    result = _provision("--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "decision: provision (root on a Debian-like system)"


def _assert_cannot(result: subprocess.CompletedProcess[str], why: str, where: str) -> None:
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"decision: cannot ({why})"]
    assert result.stderr.splitlines() == [
        f"no Docker engine answers at {where} and none can be provisioned here ({why}): start "
        "one (`sudo dockerd &`, or `sudo systemctl start docker`), or set DOCKER_HOST"
    ]


@pytest.mark.skipif(
    not IS_ROOT or shutil.which("setpriv") is None, reason="needs root to drop to nobody"
)
def test_not_root_cannot_provision(tmp_path: Path) -> None:
    """Not root, no engine: one line, exit 1, nothing run (really run as uid 65534)."""
    env = {"DOCKER_HOST": NOWHERE, "SANDBOX_OS_RELEASE": _debian_release(tmp_path)}
    drop = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    _assert_cannot(_provision("--dry-run", env=env, prefix=drop), "not root", NOWHERE)
    real = _provision(env=env, prefix=drop)
    assert (real.returncode, real.stdout) == (1, "")
    assert len(real.stderr.splitlines()) == 1


@pytest.mark.skipif(not IS_ROOT, reason="the OS is looked at as root only")
def test_not_debian_cannot_provision(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": NOWHERE, "SANDBOX_OS_RELEASE": _debian_release(tmp_path, "fedora")}
    result = _provision("--dry-run", env=env)
    _assert_cannot(result, "not a Debian-like system with apt-get", NOWHERE)


@pytest.mark.skipif(not IS_ROOT, reason="DOCKER_HOST is looked at as root only")
def test_remote_docker_host_cannot_provision(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": "tcp://127.0.0.1:1", "SANDBOX_OS_RELEASE": _debian_release(tmp_path)}
    result = _provision("--dry-run", env=env)
    _assert_cannot(result, "DOCKER_HOST names a remote engine", "tcp://127.0.0.1:1")


def test_unknown_option_is_refused() -> None:
    result = _provision("--yes")
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_ci_provisions_through_the_same_script() -> None:
    """.ci/run calls the script and no longer installs or starts the engine itself."""
    ci = (REPO / ".ci" / "run").read_text()
    commands = [line.strip() for line in ci.splitlines() if not line.strip().startswith("#")]
    assert "images/provision-docker.sh" in commands
    assert commands.index("images/provision-docker.sh") < commands.index("make test")
    code = "\n".join(commands)
    assert "docker.io" not in code and "dockerd" not in code


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target", ["demo", "replay", "test", "images", "ci-repro"])
def test_make_targets_provision_first(target: str) -> None:
    """``make -n TARGET``: the provisioning script runs before anything needs the engine."""
    dry = subprocess.run(
        ["make", "-n", "-C", str(REPO), target, "RUN=demo-orders-duplicate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    lines = [line.strip() for line in dry.stdout.splitlines()]
    assert "images/provision-docker.sh" in lines
    first_engine_user = next(
        i
        for i, line in enumerate(lines)
        if "sandbox " in line or "-m examples" in line or "pytest" in line
    )
    assert lines.index("images/provision-docker.sh") < first_engine_user


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_runs_doctor_before_the_demo() -> None:
    dry = subprocess.run(
        ["make", "-n", "-C", str(REPO), "demo"], capture_output=True, text=True, timeout=60
    )
    lines = [line.strip().lstrip("@") for line in dry.stdout.splitlines()]
    doctor = next(i for i, line in enumerate(lines) if "/sandbox doctor " in line)
    demo = next(i for i, line in enumerate(lines) if "-m examples.demo" in line)
    assert doctor < demo
