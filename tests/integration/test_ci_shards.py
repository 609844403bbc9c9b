"""``sandbox ci-repro --shard I/N`` over real captures of the support agent: the shards of a
store replay disjoint sets of runs that together are every captured failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from sandbox.regress.shard import shard_of
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker


@pytest.mark.timeout(600)
def test_the_shards_of_a_store_replay_each_failure_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from examples.capture_demo import capture_support

    store = DirectoryStore(tmp_path / "store")
    runs = {capture_support(store) for _ in range(4)}
    replayed: list[str] = []
    for index in (1, 2, 3):
        code = main(["ci-repro", "--store", str(store.root), "--shard", f"{index}/3", "--json"])
        checks = json.loads(capsys.readouterr().out)["checks"]
        assert code == (1 if checks else 0)  # every failure in the shard still reproduces
        assert all(c["outcome"] == "reproduced" for c in checks)
        mine = [c["run"] for c in checks]
        assert {shard_of(r, 3) for r in mine} <= {index}
        replayed += mine
    assert sorted(replayed) == sorted(runs)
