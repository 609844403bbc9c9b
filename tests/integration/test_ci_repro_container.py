"""``sandbox ci-repro --in-container``: the committed demo snapshot replays with the agent in
the runner container, on the sandbox's private network, and its failure still reproduces."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli.main import main
from examples.capture_demo import DEMO_RUN_ID
from sandbox.containers.labels import MANAGED, PID
from sandbox.replay.attached import attach, load_services
from sandbox.snapshot.store import DirectoryStore

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(committed_snapshots: Path) -> Path:
    return committed_snapshots


def _labelled() -> list[str]:
    """Containers and networks this process started (other sessions may run meanwhile)."""
    import docker

    client = docker.from_env()
    wanted = {"label": [f"{MANAGED}=true", f"{PID}={os.getpid()}"]}
    return [c.name for c in client.containers.list(all=True, filters=wanted)] + [
        n.name for n in client.networks.list(filters=wanted)
    ]


@pytest.mark.docker
def test_ci_repro_in_the_runner_container(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the project mounted into the runner: `examples` imports there
    args = ["ci-repro", "--store", str(store), "--in-container", "--times", "2", "--json"]
    code = main(args)
    out = capsys.readouterr()
    assert code == 1, out.out + out.err  # 1: every captured failure reproduced
    report = json.loads(out.out)
    assert report["checks"] == [
        {
            "run": DEMO_RUN_ID,
            "reason": "the same order was inserted twice",
            "outcome": "reproduced",
            "expected": "reproduced",
            "fixed_by": None,
            "reproduced": 2,
            "gone": 0,
            "inconclusive": 0,
            "total": 2,
            "error": None,
            "ok": True,
        }
    ]

    # The replays were written inside the runner container and copied back into the store.
    replays = [m for m in DirectoryStore(store).list() if m.replay_of == DEMO_RUN_ID]
    assert len(replays) == 2
    for manifest in replays:
        assert manifest.status == "complete"
        assert manifest.labels["replay.host"].startswith("sbx-")
        assert manifest.labels["replay.host"].endswith("-runner")
        assert manifest.entrypoint is not None and manifest.entrypoint.cwd == "/project"
        assert manifest.failure is not None  # reproduced
    assert main(["verify", replays[0].run_id, "--store", str(store)]) == 0
    assert _labelled() == [], "labelled containers or networks were left behind"


def test_services_must_match_the_run(tmp_path: Path) -> None:
    from sandbox.errors import ReplayError

    manifest = DirectoryStore(REPO / "snapshots").load_manifest(DEMO_RUN_ID)
    with pytest.raises(ReplayError, match="no endpoint for db"):
        attach(manifest.services, {})
    with pytest.raises(ReplayError, match="no service named cache"):
        attach(manifest.services, {"db": "postgresql://x@db/app", "cache": "redis://c"})
    bad = tmp_path / "services.json"
    bad.write_text('["db"]')
    with pytest.raises(ReplayError, match="must be an object"):
        load_services(bad)
    good = tmp_path / "good.json"
    good.write_text('{"db": "postgresql://postgres@db:5432/postgres"}')
    assert load_services(good) == {"db": "postgresql://postgres@db:5432/postgres"}


@pytest.mark.docker
def test_a_lost_reproduction_fails_in_the_runner_container(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed run, its recorded entrypoint pointed at the fixed agent: the failure no
    longer comes back in the container (every run judged), and ci-repro says so with exit 0:
    the failure is gone."""
    monkeypatch.chdir(REPO)
    path = store / "runs" / DEMO_RUN_ID / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["entrypoint"]["target"] = "examples.orders:main_fixed"
    path.write_text(json.dumps(manifest, indent=2))
    code = main(["ci-repro", "--store", str(store), "--in-container", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    (check,) = json.loads(out.out)["checks"]
    assert check["error"] is None and check["outcome"] == "gone", check  # judged, not stopped
    assert check["reproduced"] == 0 and check["total"] == 1 and not check["ok"], check
    assert _labelled() == []
