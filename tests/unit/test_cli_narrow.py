"""``sandbox list`` at 80 columns: one line per run, every line fits, run ids are never cut,
the failure is cut with an ellipsis (whole in ``--json``); ``--wide`` shows every column
whole."""

from __future__ import annotations

import re

import pytest
from snapshot_factory import build_snapshot

from cli.main import main
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.manifest import Failure

LONG_ID = "orders-replay-20240301T120000Z-1a2b3c"
"""A replay's id: 37 characters."""
LONG_FAILURE = (
    "the payment gateway timed out after the order had committed, and the retry inserted "
    "the same order a second time"
)


@pytest.fixture
def runs(store: DirectoryStore) -> DirectoryStore:
    build_snapshot(store, "short-1")
    long = build_snapshot(store, LONG_ID, save=False)
    manifest = long.manifest.model_copy(update={"failure": Failure(reason=LONG_FAILURE)})
    store.save(type(long)(manifest, long.events))
    return store


def _list(capsys: pytest.CaptureFixture[str], store: DirectoryStore, *extra: str) -> list[str]:
    code = main(["list", "--store", str(store.root), *extra])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out.splitlines()


def _words(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def test_list_fits_80_columns_one_line_per_run_with_ids_whole(
    runs: DirectoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = _list(capsys, runs)
    assert len(lines) == 2 + 2  # header, rule, one line per run
    assert max(len(line) for line in lines) <= 80
    header = re.split(r"\s{2,}", lines[0].strip())
    assert header == ["id", "events", "status", "failure"]  # the time gave way to the failure
    row = next(line for line in lines if line.startswith(f"{LONG_ID}  "))
    cells = re.split(r"\s{2,}", row)
    assert cells[1:3] == ["12", "complete"]
    assert cells[3].endswith("…") and LONG_FAILURE.startswith(cells[3][:-1])
    assert len(cells[3]) >= 20
    assert any(line.startswith("short-1 ") for line in lines)


def test_list_keeps_the_time_when_there_is_room_for_it(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    build_snapshot(store, "short-1")
    lines = _list(capsys, store)
    assert re.split(r"\s{2,}", lines[0].strip()) == ["id", "when", "events", "status", "failure"]
    assert re.split(r"\s{2,}", lines[2])[:2] == ["short-1", "2024-03-01 12:00"]


def test_list_json_has_the_whole_failure(
    runs: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    out = "\n".join(_list(capsys, runs, "--json"))
    by_id = {r["run_id"]: r for r in json.loads(out)}
    assert by_id[LONG_ID]["failure"] == LONG_FAILURE


def test_list_folds_an_id_only_when_the_terminal_is_too_narrow_for_it(
    runs: DirectoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    lines = _list(capsys, runs)
    assert max(len(line) for line in lines) <= 60
    ids = "".join(line.split(" ", 1)[0] for line in lines[2:])
    assert LONG_ID in ids  # folded over lines, no character lost


def test_list_wide_shows_every_column_whole(
    runs: DirectoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = _list(capsys, runs, "--wide")
    header = re.split(r"\s{2,}", lines[0].strip())
    assert header == ["id", "when", "entrypoint", "events", "status", "failure", "size"]
    row = next(line for line in lines if line.startswith(LONG_ID))
    assert "2024-03-01 12:00:00" in row
    assert "examples.shop:run" in row
    assert LONG_FAILURE in row
    assert re.search(r"\d+\.\d KB$", row.rstrip())
