"""A run a program opens with ``capture.run`` while no other is open is labelled with its
place among the blocks the process entered (what its replay counts again); one opened
while another is open has no place a replay could find again. A call of a script's
decorated function is labelled with the call, when its arguments are JSON and short."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.capture.openings import Openings
from sandbox.names import CALL_LABEL_MAX, OPENING_CALL_LABEL, OPENING_LABEL
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


def _script_function() -> Callable[..., None]:
    """A decorated function as a script defines it (its module ``__main__``)."""

    def quote(sku: str, qty: object = 1) -> None:
        return None

    quote.__module__, quote.__qualname__ = "__main__", "quote"
    return capture.run("quote", services="none", packages=False)(quote)


def test_a_scripts_decorated_call_is_labelled_when_its_arguments_are_json(
    store: DirectoryStore,
) -> None:
    quote = _script_function()
    quote("b", qty=30)
    quote("c", qty=object())  # not JSON: no label
    quote("d", qty="x" * CALL_LABEL_MAX)  # too long: no label
    calls = sorted(
        (m.labels.get(OPENING_CALL_LABEL) or "" for m in store.list()), key=len, reverse=True
    )
    assert calls[1:] == ["", ""]
    assert json.loads(calls[0]) == {"function": "quote", "args": ["b"], "kwargs": {"qty": 30}}
