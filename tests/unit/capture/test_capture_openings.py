"""A run a program opens with ``capture.run`` while no other is open is labelled with its
place among the blocks the process entered (what its replay counts again); one opened
while another is open has no place a replay could find again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.capture.openings import Openings
from sandbox.names import OPENING_LABEL
from sandbox.snapshot import DirectoryStore


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DirectoryStore:
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path / "store"))
    return DirectoryStore(tmp_path / "store")


@capture.run("decorated", services="none", packages=False)
def decorated() -> None:
    """A decorated task: its entrypoint is itself, so it needs no place, but it is a block
    the process entered."""


def _places(store: DirectoryStore) -> dict[str, str | None]:
    return {m.name or "": m.labels.get(OPENING_LABEL) for m in store.list()}


def test_blocks_one_after_another_are_numbered_as_the_process_entered_them(
    store: DirectoryStore,
) -> None:
    with capture.run("first", services="none", packages=False):
        pass
    decorated()
    with capture.run("third", services="none", packages=False):
        pass
    places = _places(store)
    assert places["decorated"] is None
    first, third = places["first"], places["third"]
    assert first is not None and third is not None and int(third) == int(first) + 2


def test_a_block_opened_while_another_is_open_has_no_place(store: DirectoryStore) -> None:
    inner_started = threading.Event()
    outer_may_end = threading.Event()

    def other() -> None:
        with capture.run("while-open", services="none", packages=False):
            inner_started.set()
            outer_may_end.wait(10)

    with capture.run("open-first", services="none", packages=False):
        thread = threading.Thread(target=other)
        thread.start()
        assert inner_started.wait(10)
    outer_may_end.set()
    thread.join()
    places = _places(store)
    assert places["open-first"] is not None and places["while-open"] is None


def test_the_count_goes_on_while_blocks_are_open_and_numbers_only_lone_ones() -> None:
    openings = Openings()
    assert openings.enter() == 1
    assert openings.enter() is None  # entered while the first is open
    openings.leave()
    openings.leave()
    assert openings.enter() == 3
