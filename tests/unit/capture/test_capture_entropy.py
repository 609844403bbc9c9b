"""Entropy and children at capture: the bytes ``os.urandom`` returned are recorded (and so
what ``secrets`` and unseeded ``random.Random`` drew; ``uuid4`` bound before the capture
draws the run's ids), Python children are told
apart from other programs, and a child's events round-trip through the parent's log."""

from __future__ import annotations

import importlib
import os
import random
import secrets
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4
from uuid import uuid4 as early_uuid4

from sandbox import capture
from sandbox.capture.children import adopted, events_of_child, is_python
from sandbox.snapshot.events import RandomDraw, ToolCall
from sandbox.snapshot.store import DirectoryStore


def test_entropy_draws_record_the_bytes_returned(store: DirectoryStore) -> None:
    with capture.run("entropy", store=store, packages=False) as rec:
        token = secrets.token_hex(4)
        raw = os.urandom(3)
        uid = early_uuid4()  # imported before the capture: rebound to the run's uuid4
        first = random.Random().random()
    draws = [e for e in store.load_events(rec.run_id) if isinstance(e, RandomDraw)]
    urandom = [e.value for e in draws if e.name == "os.urandom"]
    assert urandom[:2] == [token, raw.hex()]
    assert [e.value for e in draws if e.name == "uuid4"] == [str(uid)]
    assert early_uuid4 is uuid4  # the module's own name is pointed back
    seed = int(str(urandom[2]), 16)
    assert random.Random(seed).random() == first
    assert os.urandom.__module__ == "posix"  # undone


def test_recorded_values_keep_their_key_order(store: DirectoryStore) -> None:
    @capture.tool
    def lookup(sku: str) -> dict[str, object]:
        return {"sku": sku, "price": 3, "currency": "EUR", "nested": {"z": 1, "a": 2}}

    with capture.run("order", store=store, packages=False) as rec:
        lookup("A1")
    (call,) = [e for e in store.load_events(rec.run_id) if isinstance(e, ToolCall)]
    assert isinstance(call.output, dict)
    assert list(call.output) == ["sku", "price", "currency", "nested"]
    assert list(call.output["nested"]) == ["z", "a"]  # type: ignore[call-overload]


def test_python_children_are_recognised() -> None:
    assert is_python([sys.executable, "x.py"])
    assert is_python(["python3.11", "-m", "pkg"]) and is_python(["/usr/bin/python", "x.py"])
    assert not is_python(["git", "status"]) and not is_python("python x.py")


def test_child_events_round_trip_through_the_parent_log() -> None:
    when = datetime(2024, 3, 1, tzinfo=UTC).timestamp()
    events = [
        RandomDraw(seq=0, wall=when, mono=0, name="os.urandom", source="os.urandom", span=0),
        RandomDraw(seq=1, wall=when, mono=0, name="uuid4", source="uuid4", span=1, task="w-1"),
    ]
    moved = adopted(events, "child-2", 2)
    assert [(e.task, e.span) for e in moved] == [("child-2", 2_000_000), ("child-2:w-1", 2_000_001)]
    assert events_of_child(moved, "child-2") == events
    assert events_of_child(moved, "child-1") == []


def test_the_sandboxs_own_draws_are_not_the_runs(store: DirectoryStore, tmp_path: Path) -> None:
    with capture.run("own", store=store, packages=False) as rec:
        tempfile._name_sequence = None  # type: ignore[attr-defined]  # draws a seed on next use
        store.put_blob(b"a state dump", "application/octet-stream")  # an atomic write
        own = _urandom_draws(store, rec.run_id)
        tempfile._name_sequence = None  # type: ignore[attr-defined]
        os.close(tempfile.mkstemp(dir=tmp_path)[0])  # the agent's temporary file
    assert own == 0
    assert _urandom_draws(store, rec.run_id) == 1


def _uuid4_draws(store: DirectoryStore, run_id: str) -> int:
    return sum(
        1 for e in store.load_events(run_id) if isinstance(e, RandomDraw) and e.name == "uuid4"
    )


def _urandom_draws(store: DirectoryStore, run_id: str) -> int:
    return sum(
        1 for e in store.load_events(run_id) if isinstance(e, RandomDraw) and e.name == "os.urandom"
    )


def test_a_library_drawing_while_it_is_imported_is_not_the_run(
    store: DirectoryStore, tmp_path: Path
) -> None:
    """An installed library that seeds a generator or makes a uuid4 at import (aiohttp,
    opentelemetry do) draws wherever the process first imports it: not recorded. The same
    draws in the agent's own module, and the library's when the agent calls it, are."""
    suffix = uuid4().hex[:8]
    library = tmp_path / "venv" / "site-packages"
    project = tmp_path / "project"
    source = (
        "import random, uuid\nSEEDED = random.Random()\nKEY = uuid.uuid4()\n\n"
        "def draw():\n    return random.Random(), uuid.uuid4()\n"
    )
    for folder, name in ((library, f"drawlib_{suffix}"), (project, f"agentmod_{suffix}")):
        folder.mkdir(parents=True)
        (folder / f"{name}.py").write_text(source)
        sys.path.insert(0, str(folder))
    try:
        with capture.run("imports", store=store, packages=False) as rec:
            drawlib = importlib.import_module(f"drawlib_{suffix}")
            assert _urandom_draws(store, rec.run_id) == _uuid4_draws(store, rec.run_id) == 0
            importlib.import_module(f"agentmod_{suffix}")
            assert _urandom_draws(store, rec.run_id) == _uuid4_draws(store, rec.run_id) == 1
            drawlib.draw()
        assert _urandom_draws(store, rec.run_id) == _uuid4_draws(store, rec.run_id) == 2
    finally:
        for folder in (library, project):
            sys.path.remove(str(folder))
