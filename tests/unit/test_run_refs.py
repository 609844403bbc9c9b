"""Runs by name: a command takes a run id, a tag or a name (the newest captured run of that
name) wherever it takes a run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cli.main import main
from sandbox.errors import StoreError, UnknownRunError
from sandbox.snapshot import DirectoryStore, Manifest, Snapshot
from sandbox.snapshot.events import FinalResult
from sandbox.snapshot.refs import resolve_run, tag_run


def _save(store: DirectoryStore, run_id: str, name: str, hour: int, **fields: object) -> None:
    manifest = Manifest(
        run_id=run_id,
        name=name,
        created=datetime(2024, 3, 1, hour, tzinfo=UTC),
        status="complete",
        **fields,  # type: ignore[arg-type]
    )
    store.save(Snapshot(manifest, [FinalResult(seq=0, wall=1.0, mono=0.0, value=run_id)]))


@pytest.fixture
def filled(tmp_path: Path) -> DirectoryStore:
    store = DirectoryStore(tmp_path / "s")
    _save(store, "orders-20240301T090000Z-aaaaaa", "orders", 9)
    _save(store, "orders-20240301T110000Z-bbbbbb", "orders", 11)
    _save(store, "orders-replay-x", "orders", 12, replay_of="orders-20240301T110000Z-bbbbbb")
    _save(store, "billing-20240301T100000Z-cccccc", "billing", 10)
    return store


def test_a_reference_is_an_id_a_tag_or_the_newest_captured_run_of_a_name(
    filled: DirectoryStore,
) -> None:
    first = "orders-20240301T090000Z-aaaaaa"
    assert resolve_run(filled, first) == first
    assert resolve_run(filled, "orders") == "orders-20240301T110000Z-bbbbbb"  # not the replay
    tag_run(filled, first, "duplicate-order")
    assert resolve_run(filled, "duplicate-order") == first
    tag_run(filled, "billing-20240301T100000Z-cccccc", "duplicate-order")  # a tag moves
    assert resolve_run(filled, "duplicate-order") == "billing-20240301T100000Z-cccccc"
    assert filled.load_manifest(first).tags == []
    with pytest.raises(UnknownRunError, match="no run 'nothing-like-it'"):
        resolve_run(filled, "nothing-like-it")
    with pytest.raises(StoreError, match="id of another run"):
        tag_run(filled, first, "billing-20240301T100000Z-cccccc")
    # a tag keeps the run's events and seal as they were
    assert filled.load(first).events[0].value == first  # type: ignore[union-attr]
    assert main(["verify", first, "--store", str(filled.root)]) == 0


def test_commands_take_tags_and_names(
    filled: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(filled.root)
    assert main(["tag", "orders", "ticket-123", "--store", root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "run": "orders-20240301T110000Z-bbbbbb",
        "tags": ["ticket-123"],
    }
    assert main(["show", "ticket-123", "--store", root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["manifest"]["run_id"] == (
        "orders-20240301T110000Z-bbbbbb"
    )
    out = filled.root.parent / "b.tar.gz"
    assert main(["export", "billing", "-o", str(out), "--store", root]) == 0
    assert "exported billing-20240301T100000Z-cccccc" in capsys.readouterr().out
    assert main(["show", "no-such-run", "--store", root]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no run 'no-such-run'" in line
