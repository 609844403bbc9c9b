"""A run that may be dropped (``keep="failed"``, a rate) is held in memory: while it runs
nothing of it is on disk; a kept one reaches the store whole, a dropped one leaves nothing.
Past a size (the run's, or every held run's in the process) it spills to a folder aside
and goes on there; a Python child it follows writes into that folder."""

from __future__ import annotations

import contextlib
import gc
import json
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from sandbox import capture
from sandbox.capture import held
from sandbox.capture.http import HTTPAdapter
from sandbox.snapshot.events import Event, HTTPExchange, LLMCall, RandomDraw, ToolCall
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.store import PLACEHOLDER_KEY, DirectoryStore

BIG = "z" * 100_000  # stored as a blob


@capture.tool
def fetch(n: int) -> str:
    return f"{n}:{BIG}"


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != PLACEHOLDER_KEY)


def _run(store: DirectoryStore, name: str, *, fail: bool, during: list[list[Path]]) -> None:
    """A run of two tool calls with large outputs (``<fail>1:...`` and ``<fail>2:...``)."""
    try:
        with capture.run(
            name, store=store, services="none", keep="failed", cwd=str(store.root.parent)
        ):
            fetch(10 * fail + 1)
            fetch(10 * fail + 2)
            during.append(_files(store.root))
            if fail:
                raise RuntimeError("boom")
    except RuntimeError:
        pass


def test_a_held_run_writes_nothing_while_it_runs(store: DirectoryStore) -> None:
    during: list[list[Path]] = []
    before = held.held_bytes()
    _run(store, "fine", fail=False, during=during)
    _run(store, "bad", fail=True, during=during)
    capture.flush()
    assert during == [[], []]  # not a file of either run, blobs included, while it ran
    assert held.held_bytes() == before  # what they held is let go
    (kept,) = store.list()
    assert (kept.name, kept.status) == ("bad", "complete")
    events = store.load_events(kept.run_id)
    data = store.read_events_bytes(kept.run_id)
    assert (kept.event_count, kept.events_sha256) == (len(events), sha256_bytes(data))
    outputs = [e.output_blob for e in events if isinstance(e, ToolCall)]
    assert [store.get_blob(o.sha256)[:3] for o in outputs if o] == [b"11:", b"12:"]
    assert len(list(store.iter_blobs())) == 2  # the kept run's, none of the other's


@pytest.mark.parametrize("limit", ["RUN_LIMIT", "PROCESS_LIMIT"])
def test_a_run_past_a_limit_spills_aside_and_is_kept_or_dropped_whole(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    monkeypatch.setattr(held, limit, held.held_bytes() + 50_000)  # the first blob passes it
    during: list[list[Path]] = []
    _run(store, "fine", fail=False, during=during)
    _run(store, "bad", fail=True, during=during)
    capture.flush()
    for files in during:  # each run went on in its folder aside: log, manifest, both blobs
        names = [p.name for p in files]
        assert all(".tmp" in p.parts for p in files) and len(files) == 4
        assert "events.jsonl" in names and "manifest.json" in names
    assert [m.name for m in store.list()] == ["bad"]
    (kept,) = store.list()
    events = store.load_events(kept.run_id)
    assert sum(isinstance(e, ToolCall) for e in events) == 2
    assert kept.event_count == len(events)
    assert not [p for p in _files(store.root) if ".tmp" in p.parts]  # the folder aside is gone


def test_a_child_of_a_held_run_is_captured_into_it(store: DirectoryStore) -> None:
    child = [sys.executable, "-c", "import os; os.urandom(4)"]
    for fail in (False, True):
        try:
            with capture.run("kid", store=store, services="none", keep="failed"):
                subprocess.run(child, check=True)
                if fail:
                    raise RuntimeError("boom")
        except RuntimeError:
            pass
    capture.flush()
    (kept,) = store.list()
    draws = [e.task for e in store.load_events(kept.run_id) if isinstance(e, RandomDraw)]
    assert "child-1" in draws  # the child's own draw, adopted into the kept run
    assert [p.name for p in _files(store.root) if "runs" in p.parts] == [
        "events.jsonl",
        "manifest.json",
    ]


PASSWORD = "hunter2-Qx81-held"


@capture.tool
def connection() -> str:
    return f"use postgresql://app:{PASSWORD}@db:5432/shop"


@capture.tool
def report() -> str:
    return f"the password is {PASSWORD} " + BIG  # a blob, its password bare


@pytest.mark.parametrize("spill", [False, True], ids=["in-memory", "spilled"])
def test_a_secret_taught_by_a_held_line_is_redacted_from_every_file_of_the_kept_run(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch, spill: bool
) -> None:
    """Held event lines are redacted only as they leave memory: a URL password that only
    a held line shows is still learned before the run is sealed, so a blob stored after
    it, holding the password bare, is redacted too. Kept in memory, or spilled aside by
    the blob (past the run's limit)."""
    if spill:
        monkeypatch.setattr(held, "RUN_LIMIT", 50_000)
    with capture.run(
        "leak", store=store, services="none", keep="failed", cwd=str(store.root.parent)
    ):
        connection()
        report()
        capture.mark_failed("kept")
    assert capture.flush(60)
    (kept,) = store.list()
    outputs = [e for e in store.load_events(kept.run_id) if isinstance(e, ToolCall)]
    assert len(outputs) == 2 and outputs[1].output_blob is not None
    files = _files(store.root)
    assert files and not [p for p in files if PASSWORD.encode() in p.read_bytes()]
    assert b"<redacted:" in store.get_blob(outputs[1].output_blob.sha256)


def _model_run(
    store: DirectoryStore, url: str, keep: str, *, fail: bool, stream: bool = False
) -> None:
    client = openai.OpenAI(api_key="sk-held-test-key-0123456789", base_url=f"{url}/v1")
    cwd = str(store.root.parent)
    with capture.run(f"ask-{keep}", store=store, services="none", keep=keep, seed=1, cwd=cwd):
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=stream
        )
        if stream:
            list(answer)  # the streamed chunks
        httpx.post(f"{url}/echo", json={"n": 1})
        if fail:
            capture.mark_failed("kept")
    assert capture.flush(60)


def _shown(events: list[Event]) -> list[dict[str, Any]]:
    """The events as written, but for their times (the server's ``date`` header too)."""
    shown = []
    for event in events:
        if isinstance(event, HTTPExchange | LLMCall):
            data = event.model_dump(mode="json", exclude={"wall", "mono", "duration"})
            data.get("response_headers", {}).pop("date", None)
            shown.append(data)
    return shown


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_held_run_makes_its_http_events_only_when_kept_and_as_a_run_kept_whole_does(
    tmp_path: Path, fake_api: Any, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Under ``keep="failed"`` an exchange's ``http`` and ``llm`` events are made from its
    bytes only if the run is kept: a run that ends well never makes them; a kept one holds
    the same events, in the same places, as ``keep="all"`` writes as they happen."""
    made: list[int] = []
    real = HTTPAdapter._exchange

    def counted(self: HTTPAdapter, *args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(HTTPAdapter, "_exchange", counted)
    store = DirectoryStore(tmp_path / "store")  # one placeholder key for both
    _model_run(store, fake_api.url, "failed", fail=False, stream=stream)
    assert made == [] and store.list() == []
    _model_run(store, fake_api.url, "failed", fail=True, stream=stream)
    assert len(made) == 2  # the model call's exchange and the echo's, once each
    _model_run(store, fake_api.url, "all", fail=True, stream=stream)
    runs = {m.name: m for m in store.list()}
    kept, written = runs["ask-failed"], runs["ask-all"]
    assert kept.status == written.status == "complete"
    held_events = store.load_events(kept.run_id)
    shown = _shown(held_events)
    assert [e["kind"] for e in shown] == ["http", "llm", "http"]
    assert shown == _shown(store.load_events(written.run_id))
    assert [e.seq for e in held_events] == list(range(len(held_events)))
    files = [p.read_bytes() for p in _files(store.root)]
    assert not [data for data in files if b"sk-held-test-key" in data]


def test_a_held_run_that_spills_while_its_http_events_wait_makes_them_there(
    store: DirectoryStore, fake_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exchange past the run's limit spills the run as its event is appended: the
    events waiting are made then, their large bodies stored as blobs in the folder aside,
    without waiting on the recorder that is appending (the run ends, in time)."""
    monkeypatch.setattr(held, "RUN_LIMIT", 50_000)
    big = {"text": "w" * 200_000}

    def run() -> None:
        with capture.run(
            "big", store=store, services="none", keep="failed", cwd=str(store.root.parent)
        ):
            httpx.post(f"{fake_api.url}/echo", json={"n": 1})  # small: held, not made
            httpx.post(f"{fake_api.url}/echo", json=big)  # passes the limit
            capture.mark_failed("kept")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the run did not end"
    assert capture.flush(60)
    (kept,) = store.list()
    exchanges = [e for e in store.load_events(kept.run_id) if isinstance(e, HTTPExchange)]
    assert kept.status == "complete" and len(exchanges) == 2
    assert exchanges[0].response_body == {"echo": {"n": 1}}
    assert exchanges[1].request_blob is not None and exchanges[1].response_blob is not None
    assert json.loads(store.get_blob(exchanges[1].request_blob.sha256)) == big


def test_a_dropped_run_leaves_no_cycle_of_capture_objects_for_the_collector(
    store: DirectoryStore,
) -> None:
    """A run that ends well and is dropped is freed as it ends: none of the capture's
    objects is left in a reference cycle (a service under load would otherwise carry every
    dropped run into the oldest generation, and collect the whole heap more often)."""
    _run(store, "warm", fail=False, during=[])  # patches and caches made once per process
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _run(store, "fine", fail=False, during=[])
        gc.collect()
        ours = sorted(
            {type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("sandbox")}
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []


def test_a_response_that_outlives_its_dropped_run_does_not_keep_the_run(
    store: DirectoryStore, fake_api: Any
) -> None:
    """httpx's responses are freed by the collector (they sit in reference cycles of
    httpx's own); a response holds the exchange's recording through its stream, and that
    holds nothing of the run: the recorder, its writer and its store are freed as the
    dropped run ends, not carried into the collector's garbage with the response."""

    def run(name: str) -> None:
        with httpx.Client() as client, capture.run(name, store=store, keep="failed"):
            for n in range(3):
                client.post(f"{fake_api.url}/echo", json={"n": n}).json()

    run("warm")  # patches and caches made once per process
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run("fine")
        gc.collect()
        garbage = {type(o).__qualname__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert "HTTPAdapter" in garbage  # with httpx's response, as the docstring says
    assert not garbage & {"Recorder", "HeldWriter", "HeldStore", "Capture"}
    assert store.list() == []


def test_a_held_run_keeps_no_request_of_an_exchange_it_has_done(
    store: DirectoryStore, fake_api: Any
) -> None:
    """Once an exchange is done, what a held run keeps of it holds the request's method
    and headers, not the httpx request itself (with its URL, stream and dicts): the request
    is freed while the run is still open, and the kept run's event still has them."""
    run = capture.run("held", store=store, services="none", keep="failed")
    with httpx.Client() as client, run:
        response = client.post(f"{fake_api.url}/echo", json={"n": 1}, headers={"x-a": "b"})
        assert response.json() == {"echo": {"n": 1}}
        request = weakref.ref(response.request)
        del response
        gc.collect()
        freed = request() is None
        capture.mark_failed("kept")
    assert freed
    assert capture.flush(60)
    (kept,) = store.list()
    (exchange,) = [e for e in store.load_events(kept.run_id) if isinstance(e, HTTPExchange)]
    assert exchange.method == "POST" and exchange.request_headers["x-a"] == "b"


def test_a_held_exchange_keeps_at_most_ten_objects_the_collector_tracks(
    store: DirectoryStore, fake_api: Any
) -> None:
    """A service holds every run in flight, and under load each one reaches the oldest
    generation, where each tracked object it keeps makes full collections more frequent:
    ten exchanges in a held run keep at most 100 tracked objects more alive than the same
    ten made outside any run (the exchange's call, its held line, its recording, and the
    request's and response's headers)."""

    def alive_after(exchanges: int, captured: bool) -> int:
        run = capture.run("count", store=store, services="none", keep="failed")
        with httpx.Client() as client, run if captured else contextlib.nullcontext():
            gc.collect()
            before = len(gc.get_objects())
            for n in range(exchanges):
                client.post(f"{fake_api.url}/echo", json={"n": n}).json()
            gc.collect()
            return len(gc.get_objects()) - before

    def held_by_ten(captured: bool) -> int:
        return alive_after(10, captured) - alive_after(0, captured)

    held_by_ten(True)  # patches and caches made once per process
    extra = held_by_ten(True) - held_by_ten(False)
    assert 0 < extra <= 100, extra


def test_a_held_run_keeps_at_most_75_objects_the_collector_tracks(
    store: DirectoryStore,
) -> None:
    """Another run holding the process's patches, a held run that has crossed nothing yet
    keeps at most 75 tracked objects alive (its recorder, writer, manifest, redactor and
    the steps that undo it), each one more for the collector while it runs."""
    ready, done = threading.Event(), threading.Event()

    def holder() -> None:
        with capture.run("holder", store=store, services="none", keep="failed"):
            ready.set()
            done.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    assert ready.wait(30)
    counts = []
    try:
        for _ in range(2):  # the first makes what a process makes once
            gc.collect()
            before = len(gc.get_objects())
            with capture.run("count", store=store, services="none", keep="failed"):
                gc.collect()
                counts.append(len(gc.get_objects()) - before)
    finally:
        done.set()
        thread.join(30)
    assert 0 < counts[-1] <= 75, counts


def test_a_line_written_after_the_run_is_let_go_is_not_held(store: DirectoryStore) -> None:
    """A late line (a stream closed after its run ended and was dropped) is neither held
    nor spilled: the process's held total is unchanged and no folder aside is made."""
    from datetime import UTC, datetime

    from sandbox.snapshot.manifest import Manifest

    staging = held.HeldStore(store)
    writer = staging.begin(Manifest(run_id="late-1", created=datetime.now(UTC)))
    writer.append_raw(b'{"n": 1}\n')
    staging.discard()
    before = held.held_bytes()
    writer.append_raw(b"x" * (held.RUN_LIMIT + 1))
    writer.append_pending(b"y" * (held.RUN_LIMIT + 1), lambda line: line)
    assert held.held_bytes() == before
    assert not list(store.staging_dir().glob("keep-*"))


SECRET = "tok-held-manifest-9f8e7d6c5b4a"


@pytest.mark.parametrize(
    ("keep", "spill"),
    [("failed", False), ("failed", True), (1.0 - 1e-9, False)],
    ids=["failed-in-memory", "failed-spilled", "kept-at-a-rate"],
)
def test_a_held_runs_manifest_is_redacted_whenever_it_leaves_memory(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch, keep: Any, spill: bool
) -> None:
    """A held run's manifest is held as made (a dropped run never redacts it): a secret in
    its labels reaches no file, neither aside while the run goes on (spilled) nor in the
    store once it is kept (failed, or at a rate without failing), where it is a
    placeholder."""
    if spill:
        monkeypatch.setattr(held, "RUN_LIMIT", 50_000)
    during: list[bytes] = []
    with capture.run(
        "labelled",
        store=store,
        services="none",
        keep=keep,
        sampler=lambda: 0.0,
        environ={"SERVICE_TOKEN": SECRET},
        labels={"who": SECRET},
        cwd=str(store.root.parent),
    ):
        report()
        during.extend(p.read_bytes() for p in _files(store.root))
        if keep == "failed":
            capture.mark_failed("kept")
    assert capture.flush(60)
    (kept,) = store.list()
    assert bool(during) == spill  # the folder aside, only once spilled
    assert not [data for data in during if SECRET.encode() in data]
    assert not [p for p in _files(store.root) if SECRET.encode() in p.read_bytes()]
    assert kept.labels["who"].startswith("<redacted:")
