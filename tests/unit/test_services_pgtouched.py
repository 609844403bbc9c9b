"""The pure parts of touched-state capture (:mod:`sandbox.services.postgres.pgtouched`): which
tables moved, which a replay reached outside the capture, how their rows are left out of a dump,
and what the manifest says."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from sandbox.errors import ServiceError
from sandbox.services.postgres.pgtouched import (
    WAIT_ENV,
    describe_meta,
    exclusions,
    outside,
    partial_meta,
    touched,
    wait_limit,
)

START = {
    "public.a": (1, 0, 0, 0, 0, 0),
    "public.b": (2, 3, 1, 0, 0, 0),
    "public.c": (3, 0, 0, 5, 0, 0),
    "public.d": (4, 0, 0, 0, 0, 0),
}


def test_touched_are_the_tables_whose_counters_or_file_moved_or_that_are_gone() -> None:
    end = {
        "public.a": (1, 1, 0, 0, 0, 0),  # one sequential scan
        "public.b": (2, 3, 1, 0, 0, 0),  # unchanged
        "public.c": (9, 0, 0, 5, 0, 0),  # a new file (TRUNCATE, a rewrite)
        "public.new": (5, 0, 0, 1, 0, 0),  # created during the run: not in the snapshot
    }
    assert touched(START, end) == {"public.a", "public.c", "public.d"}


def test_outside_names_reads_and_writes_of_tables_not_captured() -> None:
    now = {
        "public.a": (1, 1, 0, 0, 0, 0),
        "public.b": (2, 0, 2, 0, 0, 0),
        "public.c": (3, 0, 0, 0, 1, 0),
        "public.d": (4, 0, 0, 0, 0, 0),
    }
    found = outside(now, ["public.a"])
    assert [m.describe() for m in found] == [
        "read table public.b, whose rows were not captured",
        "wrote table public.c, whose rows were not captured",
    ]
    assert outside(now, ["public.a", "public.b", "public.c"]) == []


def test_exclusions_quote_each_name_so_no_pattern_character_matches_more() -> None:
    assert exclusions(["public.big", 'odd.we"ird*']) == [
        '--exclude-table-data="odd"."we""ird*"',
        '--exclude-table-data="public"."big"',
    ]


def test_describe_meta_says_partial_or_why_whole() -> None:
    meta = partial_meta(["public.b", "public.a"], 5)
    assert describe_meta(meta) == "partial: rows of 2 of 5 tables (public.a, public.b)"
    assert describe_meta({"note": "statistics are off"}) == "whole: statistics are off"
    assert describe_meta({"database": "app"}) is None


def test_wait_limit_reads_its_variable_and_refuses_nonsense(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WAIT_ENV, "2.5")
    assert wait_limit() == 2.5
    monkeypatch.setenv(WAIT_ENV, "soon")
    with pytest.raises(ServiceError, match=WAIT_ENV):
        wait_limit()


def test_an_unknown_state_mode_is_one_error_line_and_no_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    code = main(["capture", "--name", "x", "--store", str(store), "--state", "some", "--", "true"])
    err = capsys.readouterr().err
    assert code == 125  # capture's own failure, apart from the program's exit codes
    assert "state mode 'some' is not one of: whole, touched" in err
    assert len(err.strip().splitlines()) == 1
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())
