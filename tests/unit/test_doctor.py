"""``sandbox doctor`` without an engine: the engine line, the space checks and the output
formats (the checks against real images are in tests/integration/test_doctor_engine.py)."""

from __future__ import annotations

import json

import pytest
from snapshot_factory import build_snapshot

from cli.main import main
from sandbox.doctor import SPACE_HEADROOM, DiskUsage, diagnose
from sandbox.errors import DockerUnavailableError
from sandbox.sizes import human_size
from sandbox.snapshot import DirectoryStore

NOWHERE = "unix:///nonexistent-sandbox-test/docker.sock"
ENGINE_LINE = (
    f"fail  engine                     no Docker engine answers at {NOWHERE}; fix: `make engine` "
    "(as root on Debian it installs and starts one), or start dockerd, or set DOCKER_HOST"
)


@pytest.fixture(autouse=True)
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)


def _no_engine() -> None:
    raise DockerUnavailableError("down")


def _free(n: int) -> DiskUsage:
    return DiskUsage(total=n, used=0, free=n)


def test_engine_down_is_one_fail_line_and_exit_1(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--store", str(store.root)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0] == ENGINE_LINE
    assert [line for line in out if line.startswith("fail")] == [ENGINE_LINE]
    assert "off   images                     not checked: no engine" in out
    assert "off   libfaketime                not checked: no engine" in out
    assert "off   memory                     not checked: no engine" in out


def test_quiet_prints_only_what_is_not_ok(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--store", str(store.root), "--quiet"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert ENGINE_LINE in lines
    assert all(line.startswith(("fail", "warn")) for line in lines)


def test_json_lists_every_check(store: DirectoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--store", str(store.root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (data["ok"], data["exit_code"]) == (False, 1)
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["engine"]["status"] == "fail"
    assert by_name["engine"]["fix"].startswith("`make engine`")
    assert by_name["space"]["status"] == "ok"
    assert {"integration openai", "integration anthropic", "integration mcp"} <= set(by_name)


def test_store_volume_smaller_than_the_largest_state_needs(store: DirectoryStore) -> None:
    """The free space at the store is compared with the largest captured state plus room."""
    build_snapshot(store)  # a postgres state of 1500 bytes
    need = SPACE_HEADROOM + 1500
    short = diagnose(store, connect_engine=_no_engine, disk_usage=lambda _: _free(need - 1))
    space = next(c for c in short.checks if c.name == "space")
    assert space.status == "fail"
    assert space.detail == (
        f"{human_size(need - 1)} free at {store.root}, {human_size(need)} needed: 64.0 MB for "
        "a replay's events and reports plus the largest captured state, 1.5 KB (run-1, "
        "service db)"
    )
    assert "larger volume" in space.fix
    enough = diagnose(store, connect_engine=_no_engine, disk_usage=lambda _: _free(need))
    assert next(c for c in enough.checks if c.name == "space").status == "ok"


def test_the_space_of_a_store_not_made_yet_is_its_parent_volume(tmp_path: object) -> None:
    seen: list[str] = []

    def usage(path: str) -> DiskUsage:
        seen.append(path)
        return _free(10**12)

    store = DirectoryStore(f"{tmp_path}/not/yet/made")
    diagnose(store, connect_engine=_no_engine, disk_usage=usage)
    assert seen == [str(tmp_path)]


def test_sizes() -> None:
    assert [human_size(n) for n in (512, 1536, 256 * 1024**2, 5 * 1024**4)] == [
        "512 B",
        "1.5 KB",
        "256.0 MB",
        "5.0 TB",
    ]


def test_an_integration_is_found_by_its_module_whichever_distribution_installed_it(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """pydantic-ai installed as ``pydantic-ai-slim`` (no ``pydantic-ai`` distribution) is
    installed: its module ``pydantic_ai`` is there."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("pydantic_ai") is None:
        pytest.skip("pydantic_ai is not importable here")
    dists = importlib.metadata.packages_distributions()["pydantic_ai"]
    dist = "pydantic-ai" if "pydantic-ai" in dists else dists[0]
    main(["doctor", "--store", str(store.root), "--json"])
    by_name = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    check = by_name["integration pydantic-ai"]
    assert check["status"] == "ok"
    assert check["detail"] == f"{dist} {importlib.metadata.version(dist)}"
    assert by_name["integration openai-agents"]["status"] == "ok"  # module `agents`
