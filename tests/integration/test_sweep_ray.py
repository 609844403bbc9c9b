"""``sandbox sweep`` on a real Ray cluster started by the test on this machine (a head that
runs no task and two worker nodes offering the ``docker`` resource), the runs in an object
store (moto's S3 server): the sweep's verdicts equal the local ``replay``'s, and a worker
node killed mid-sweep costs a retry, not a wrong verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.replay.engine import replay
from sandbox.snapshot.manifest import Failure, ResultPredicate, SQLInvariant
from sandbox.snapshot.spool import SpooledStore
from sandbox.snapshot.store import DirectoryStore
from sandbox.snapshot.transfer import copy_run
from sandbox.sweep import sweep

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
TIMES = 3


@pytest.fixture(scope="module")
def env(
    s3_process: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """boto3's variables for the test S3 server and a spool folder, in this process' environment
    (the Ray nodes started below inherit it)."""
    import boto3

    endpoint, _ = s3_process
    values = {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SANDBOX_SPOOL": str(tmp_path_factory.mktemp("ray") / "spool"),
        "PYTHONPATH": str(ROOT),
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in values.items():
            mp.setenv(name, value)
        boto3.session.Session().client("s3").create_bucket(Bucket="sweeps")
        yield values


@pytest.fixture(scope="module")
def runs(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """Three captures of the support agent, published to ``s3://sweeps/team``: one judged by
    its recorded predicate (reproduced), one by a predicate its answer never meets (gone), one
    by an SQL query on a service it does not have (could not judge)."""
    from examples.capture_demo import capture_support

    local = DirectoryStore(tmp_path_factory.mktemp("captures"))
    ids = [capture_support(local) for _ in range(3)]
    predicates = {
        ids[1]: ResultPredicate(path="answer", op="contains", value="no such words"),
        ids[2]: SQLInvariant(service="nope", query="SELECT 1"),
    }
    for run_id, predicate in predicates.items():
        manifest = local.load_manifest(run_id)
        failure = Failure(reason=f"judged by {predicate.kind}", predicate=predicate)
        changed = manifest.model_copy(update={"failure": failure})
        local.save_raw(changed, local.read_events_bytes(run_id), overwrite=True)
    url = "s3://sweeps/team"
    remote = SpooledStore(url, Path(env["SANDBOX_SPOOL"]) / "publisher", background=False)
    for run_id in ids:
        copy_run(local, remote, run_id)
    remote.flush()
    return url, ids


@pytest.fixture(scope="module")
def expected(
    runs: tuple[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[str, int, int, int]]:
    """The local ``replay`` of each run, ``TIMES`` times: outcome, reproduced, gone,
    inconclusive."""
    url, ids = runs
    store = SpooledStore(url, tmp_path_factory.mktemp("local-spool"), background=False)
    found = {}
    for run_id in ids:
        verdict = replay(run_id, store=store, times=TIMES).verdict
        found[run_id] = (verdict.outcome, verdict.reproduced, verdict.gone, verdict.inconclusive)
    return found


@pytest.fixture(scope="module")
def cluster(env: dict[str, str]) -> Iterator[object]:
    from ray.cluster_utils import Cluster

    head = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    for _ in range(2):
        head.add_node(num_cpus=1, resources={"docker": 1})
    head.wait_for_nodes()
    yield head
    head.shutdown()


def test_the_expected_verdicts_are_the_three_outcomes(
    runs: tuple[str, list[str]], expected: dict[str, tuple[str, int, int, int]]
) -> None:
    _, ids = runs
    assert [expected[r] for r in ids] == [
        ("reproduced", TIMES, 0, 0),
        ("gone", 0, TIMES, 0),
        ("inconclusive", 0, 0, TIMES),
    ]


def test_a_sweep_gives_the_verdicts_of_the_local_replay(
    cluster: object,
    runs: tuple[str, list[str]],
    expected: dict[str, tuple[str, int, int, int]],
) -> None:
    url, ids = runs
    store = SpooledStore(url, Path(os.environ["SANDBOX_SPOOL"]) / "driver", background=False)
    manifests = [store.load_manifest(r) for r in ids]
    seen = []
    results = sweep(
        manifests,
        store=url,
        times=TIMES,
        address=cluster.address,  # type: ignore[attr-defined]
        project=ROOT,
        progress=seen.append,
    )
    got = {
        r.manifest.run_id: (
            r.verdict.outcome,
            r.verdict.reproduced,
            r.verdict.gone,
            r.verdict.inconclusive,
        )
        for r in results
    }
    assert got == expected
    assert [s.done for s in seen] == list(range(1, 3 * TIMES + 1))
    # Each replay was written back to the object store as a run of its own.
    replays = [m for m in store.list() if m.replay_of is not None]
    assert sorted(m.replay_of for m in replays if m.replay_of in ids[:2]) == sorted(
        [ids[0]] * TIMES + [ids[1]] * TIMES
    )


def test_a_worker_node_killed_mid_sweep_costs_a_retry_not_a_verdict(
    cluster: object,
    runs: tuple[str, list[str]],
    expected: dict[str, tuple[str, int, int, int]],
    tmp_path: Path,
) -> None:
    url, ids = runs
    address = cluster.address  # type: ignore[attr-defined]
    err = tmp_path / "stderr"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "sweep",
                *ids,
                "--times",
                str(TIMES),
                "--ray",
                address,
                "--store",
                url,
                "--project",
                str(ROOT),
                "--json",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        # Kill a worker node once the sweep is under way (its first replay judged).
        deadline = time.monotonic() + 300
        while "(1/" not in err.read_text():
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.2)
        worker = cluster.list_all_nodes()[1]  # type: ignore[attr-defined]
        cluster.remove_node(worker, allow_graceful=False)  # type: ignore[attr-defined]
        out, _ = proc.communicate(timeout=900)
    progress = err.read_text()
    assert f"({3 * TIMES}/{3 * TIMES})" in progress
    data = json.loads(out)
    got = {
        r["run"]: (r["outcome"], r["reproduced"], r["gone"], r["inconclusive"])
        for r in data["runs"]
    }
    assert got == expected
    assert proc.returncode == 2  # one run could not be judged: the sweep says so
