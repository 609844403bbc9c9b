"""``--shard I/N``: shards are disjoint, cover the store, even, and stable as runs are added."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.main import main
from sandbox.regress.shard import Shard, shard_of

RUN_IDS = st.lists(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,40}", fullmatch=True), unique=True)
"""Adding runs to a store never moves another: a shard is a function of the run id alone."""


@given(RUN_IDS, st.integers(1, 8))
def test_shards_are_disjoint_and_cover_the_runs(run_ids: list[str], count: int) -> None:
    shards = [Shard(i, count) for i in range(1, count + 1)]
    for run_id in run_ids:
        assert [s.index for s in shards if s.holds(run_id)] == [shard_of(run_id, count)]


def test_a_runs_shard_is_pinned_to_its_id() -> None:
    """The first 8 bytes of the id's SHA-256 modulo N: a change here would reshuffle every
    CI matrix, so it is pinned."""
    assert [shard_of("demo-orders-duplicate", n) for n in range(1, 9)] == [1, 2, 3, 4, 3, 6, 6, 8]


def test_shards_are_even_over_many_runs() -> None:
    counts = [0] * 4
    for n in range(4000):
        counts[shard_of(f"orders-20240301-{n:06d}", 4) - 1] += 1
    assert all(900 <= c <= 1100 for c in counts), counts


@pytest.mark.parametrize("spec", ["0/3", "4/3", "1/0", "a/b", "2", "1/2/3", "-1/2"])
def test_a_bad_shard_is_refused_with_the_form(spec: str) -> None:
    with pytest.raises(ValueError, match=r"expected I/N with 1 <= I <= N"):
        Shard.parse(spec)


def test_ci_repro_refuses_a_bad_shard_in_one_line(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ci-repro", "--store", str(tmp_path), "--shard", "5/4"]) == 2
    assert "invalid shard '5/4'" in capsys.readouterr().err


def test_ci_repro_says_when_a_shard_is_empty(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ci-repro", "--store", str(tmp_path), "--shard", "2/4"]) == 0
    assert "no captured failures in shard 2/4 of the store" in capsys.readouterr().err


def test_dry_run_lists_the_shards_runs(
    committed_snapshots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = []
    store = str(committed_snapshots)
    for index in (1, 2, 3):
        assert main(["ci-repro", "--store", store, "--shard", f"{index}/3", "--dry-run"]) == 0
        listed.append(capsys.readouterr().out.split())
    assert listed == [[], [], ["demo-orders-duplicate"]]
