"""The capture API: run(), tools, retrieval, memory, markers, seeds, ids, clock, concurrency."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import pytest

from sandbox import capture
from sandbox.capture.clock import FakeClock
from sandbox.errors import CaptureError
from sandbox.snapshot.events import (
    ClockRead,
    FinalResult,
    MemoryOp,
    RandomDraw,
    Retrieval,
    StateTransition,
    ToolCall,
)
from sandbox.snapshot.hashing import sha256_bytes
from sandbox.snapshot.manifest import ExceptionPredicate, ResultPredicate, SQLInvariant
from sandbox.snapshot.store import DirectoryStore


@capture.tool
def lookup(
    order_id: int, region: Literal["eu", "us"] = "eu", *, verbose: bool = False
) -> dict[str, Any]:
    """Look an order up.

    Longer text that is not the description."""
    return {"id": order_id, "region": region}


@capture.tool("pay")
async def pay(cents: int) -> str:
    await asyncio.sleep(0)
    return f"paid {cents}"


@capture.tool
def explode(reason: str) -> None:
    raise ValueError(reason)


def _events(store: DirectoryStore, run_id: str, kind: type) -> list[Any]:
    return [e for e in store.load_events(run_id) if isinstance(e, kind)]


def test_tool_calls_are_recorded_with_schema_args_and_output(store: DirectoryStore) -> None:
    with capture.run("tools", store=store, seed=5) as rec:
        assert lookup(7, verbose=True) == {"id": 7, "region": "eu"}
        assert asyncio.run(pay(250)) == "paid 250"
        with pytest.raises(ValueError, match="boom"):
            explode("boom")
    first, second, third = _events(store, rec.run_id, ToolCall)
    assert first.name == "lookup" and first.args == {"order_id": 7, "region": "eu", "verbose": True}
    assert first.output == {"id": 7, "region": "eu"} and first.error is None
    schema = first.tool_schema
    assert schema["description"] == "Look an order up."
    params = schema["parameters"]
    assert params["required"] == ["order_id"]
    assert params["properties"]["order_id"] == {"type": "integer"}
    assert params["properties"]["region"]["enum"] == ["eu", "us"]
    assert params["properties"]["region"]["default"] == "eu"
    assert second.name == "pay" and second.args == {"cents": 250} and second.output == "paid 250"
    assert third.error is not None and third.error.type == "ValueError"
    assert third.error.message == "boom" and third.output is None
    assert first.started <= first.mono and first.duration >= 0
    assert first.fingerprint is not None and first.fingerprint != second.fingerprint
    manifest = store.load_manifest(rec.run_id)
    assert manifest.status == "complete" and manifest.event_count == len(
        store.load_events(rec.run_id)
    )
    raw = (store.run_dir(rec.run_id) / "events.jsonl").read_bytes()
    assert manifest.events_sha256 == sha256_bytes(raw)
    assert manifest.failure is None  # the ValueError was caught inside the run


def test_tools_outside_a_capture_run_unchanged(store: DirectoryStore) -> None:
    assert lookup(1) == {"id": 1, "region": "eu"}
    assert capture.active() is None
    capture.state("ignored")  # no capture: nothing happens
    with pytest.raises(CaptureError, match="no capture"):
        capture.mark_failed("nobody records this")


def test_large_output_goes_to_a_blob(store: DirectoryStore) -> None:
    big = "x" * 100_000

    @capture.tool
    def dump() -> str:
        return big

    with capture.run("blob", store=store, seed=1, blob_threshold=1024) as rec:
        dump()
    (event,) = _events(store, rec.run_id, ToolCall)
    assert event.output is None and event.output_blob is not None
    assert store.get_blob(event.output_blob.sha256) == big.encode()
    assert len((store.run_dir(rec.run_id) / "events.jsonl").read_bytes()) < 5_000


def test_manifest_describes_the_run(store: DirectoryStore) -> None:
    env = {
        "HOME": "/home/x",
        "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstu",
        "DB_PASSWORD": "hunter22",
    }
    config = capture.RedactionConfig(env_record=tuple(env))
    with capture.run(
        "manifest", store=store, seed=99, environ=env, labels={"team": "a"}, redaction=config
    ) as rec:
        pass
    m = store.load_manifest(rec.run_id)
    assert m.run_id.startswith("manifest-") and m.name == "manifest"
    assert m.seeds["run"] == 99 and m.seeds["random"] == 99 and "uuid4" in m.seeds
    assert m.runtime is not None and "pydantic" in m.runtime.packages
    assert m.clock is not None and m.clock.start.tzinfo is not None and m.clock.timezone
    assert m.pid is not None and m.host
    opening = m.labels.pop("sandbox.opening")  # its place among the process's blocks
    assert opening.isdigit() and float(m.labels.pop("sandbox.opening.after_s")) >= 0
    assert m.labels.pop("sandbox.naming") == "origin"  # tasks and pool work named so
    assert m.labels == {"team": "a", "sandbox.opened": "capture.run"}  # opened in the program
    assert m.env["HOME"] == "/home/x"
    assert m.env["OPENAI_API_KEY"].startswith("<redacted:")
    assert m.env["DB_PASSWORD"].startswith("<redacted:")
    assert m.code.commit is not None  # the tests run inside the project's git checkout
    if m.code.dirty and m.code.diff is not None:
        assert store.has_blob(m.code.diff.sha256)


def test_exception_marks_the_run_failed_and_propagates(store: DirectoryStore) -> None:
    cap = capture.run("crashy", store=store, seed=1, run_id="crashy-1")
    with pytest.raises(KeyError), cap:
        raise KeyError("order 7 missing")
    m = store.load_manifest("crashy-1")
    assert m.status == "complete" and m.failure is not None
    assert m.failure.predicate == ExceptionPredicate(
        type="KeyError", message_contains="'order 7 missing'"
    )
    (final,) = _events(store, "crashy-1", FinalResult)
    assert final.error is not None and final.error.type == "KeyError"


@pytest.mark.parametrize(
    "predicate",
    [
        SQLInvariant(service="db", query="select 1 from orders group by id having count(*) > 1"),
        ResultPredicate(path="status", op="eq", value="duplicate"),
        ExceptionPredicate(type="builtins.RuntimeError"),
    ],
)
def test_mark_failed_stores_the_predicate_as_data(store: DirectoryStore, predicate: Any) -> None:
    with capture.run("marked", store=store, seed=1) as rec:
        capture.result({"status": "duplicate"})
        capture.mark_failed("duplicate order", predicate=predicate)
    m = store.load_manifest(rec.run_id)
    assert m.failure is not None and m.failure.reason == "duplicate order"
    assert m.failure.predicate == predicate
    (final,) = _events(store, rec.run_id, FinalResult)
    assert final.value == {"status": "duplicate"}
    marks = [e for e in _events(store, rec.run_id, StateTransition) if e.name == "sandbox.failure"]
    assert marks[0].data["failure"]["predicate"]["kind"] == predicate.kind


def test_decorator_form_sync_and_async(store: DirectoryStore) -> None:
    @capture.run("decorated", store=store, seed=3)
    def agent(n: int) -> int:
        lookup(n)
        return n * 2

    @capture.run("adecorated", store=store, seed=3)
    async def aagent() -> str:
        return await pay(1)

    assert agent(4) == 8 and agent(5) == 10
    assert asyncio.run(aagent()) == "paid 1"
    runs = store.list()
    assert sorted(m.name for m in runs) == ["adecorated", "decorated", "decorated"]
    for m in runs:
        assert m.entrypoint is not None and m.entrypoint.kind == "callable"
        assert m.entrypoint.target is not None and m.entrypoint.target.endswith(("agent", "aagent"))


def test_retriever_memory_state_clock(store: DirectoryStore) -> None:
    @capture.retriever
    def search(query: str, k: int = 2) -> list[dict[str, Any]]:
        return [
            {"id": "doc-1", "content": "Refunds take 5 days.", "score": 0.9},
            {"id": "doc-2", "text": "Orders ship Tuesday.", "metadata": {"src": "faq"}},
        ][:k]

    memory: dict[str, Any] = {"prefs": {"lang": "fr"}}
    clock = FakeClock(start=1_700_000_000.0)
    with capture.run("rag", store=store, seed=1, clock=clock) as rec:
        docs = search("refund policy")
        prefs = capture.memory_read("prefs", lambda: memory["prefs"])
        capture.memory_write(
            "last_query", "refund policy", commit=lambda v: memory.update(last_query=v)
        )
        capture.state("answering", source="retrieving", docs=len(docs))
        clock.advance(12.5)
        t = capture.now()
    assert len(docs) == 2 and prefs == {"lang": "fr"} and memory["last_query"] == "refund policy"
    assert t == 1_700_000_012.5
    (retrieval,) = _events(store, rec.run_id, Retrieval)
    assert retrieval.query == "refund policy"
    assert [d.id for d in retrieval.documents] == ["doc-1", "doc-2"]
    doc = retrieval.documents[0]
    assert doc.sha256 == sha256_bytes(b"Refunds take 5 days.") and doc.score == 0.9
    assert doc.blob is not None and store.get_blob(doc.blob.sha256) == b"Refunds take 5 days."
    assert retrieval.documents[1].metadata == {"src": "faq"}
    read, write = _events(store, rec.run_id, MemoryOp)
    assert (read.op, read.key, read.value) == ("read", "prefs", {"lang": "fr"})
    assert (write.op, write.key, write.value) == ("write", "last_query", "refund policy")
    (st,) = _events(store, rec.run_id, StateTransition)
    assert (st.source, st.target, st.data) == ("retrieving", "answering", {"docs": 2})
    (clock_read,) = _events(store, rec.run_id, ClockRead)
    assert clock_read.value == 1_700_000_012.5 and clock_read.wall == 1_700_000_012.5
    assert store.load_manifest(rec.run_id).clock.start.timestamp() == 1_700_000_000.0  # type: ignore[union-attr]


def test_seeds_and_uuids_are_deterministic_and_restored(store: DirectoryStore) -> None:
    original = uuid.uuid4
    draws = []
    for i in range(2):
        with capture.run("ids", store=store, seed=42, run_id=f"ids-{i}") as rec:
            draws.append(([uuid.uuid4() for _ in range(3)], random.random()))
            assert uuid.uuid4 is not original
    assert uuid.uuid4 is original
    assert draws[0] == draws[1]
    assert all(u.version == 4 for u in draws[0][0])
    events = _events(store, rec.run_id, RandomDraw)
    assert events[0].source == "random.seed" and events[0].seed == 42
    assert [e.value for e in events if e.source == "uuid4"] == [str(u) for u in draws[1][0]]
    with capture.run("ids", store=store, seed=43, run_id="ids-other"):
        assert uuid.uuid4() != draws[0][0][0]


def test_concurrent_tool_calls_record_tasks_start_and_completion_order(
    store: DirectoryStore,
) -> None:
    @capture.tool
    async def slow(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        return name

    async def main() -> list[str]:
        first = asyncio.create_task(slow("first", 0.05), name="worker-a")
        await asyncio.sleep(0.005)  # make the start order certain
        second = asyncio.create_task(slow("second", 0.0), name="worker-b")
        return list(await asyncio.gather(first, second))

    with capture.run("race", store=store, seed=1) as rec:
        assert asyncio.run(main()) == ["first", "second"]
    done = _events(store, rec.run_id, ToolCall)
    # Completion order (seq): second finished first, although it started later.
    assert [e.output for e in done] == ["second", "first"]
    assert [e.task for e in done] == ["worker-b", "worker-a"]
    assert done[0].seq < done[1].seq
    assert done[1].started < done[0].started  # start order is kept too
    assert done[1].span < done[0].span  # type: ignore[operator]


def test_threads_get_their_own_task_ids(store: DirectoryStore) -> None:
    gate = threading.Event()

    @capture.tool
    def work(n: int) -> int:
        if n == 1:
            gate.wait(5)
        else:
            gate.set()
        return n

    with capture.run("threads", store=store, seed=1) as rec:
        threads = [threading.Thread(target=work, args=(n,), name=f"t{n}") for n in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    done = _events(store, rec.run_id, ToolCall)
    assert [(e.task, e.output) for e in done] == [("t2", 2), ("t1", 1)]
    seqs = [e.seq for e in store.load_events(rec.run_id)]
    assert seqs == list(range(len(seqs)))


def test_threads_python_numbers_are_numbered_for_each_run(store: DirectoryStore) -> None:
    """Executors and threads with Python's default names (numbered across the process)
    are numbered again in each run, in the order they first cross, each kind on its own
    and from the number a new process starts at (an executor's work named by its
    submitter, the executor and the order it was submitted in): two runs doing the same
    work, one after the other, hold the ids a new process gives."""

    @capture.tool
    def work(n: int) -> int:
        return n

    def run_once() -> list[str]:
        ThreadPoolExecutor().shutdown()  # one more executor in the process
        threading.Thread(target=lambda: None).start()  # and one more thread
        with capture.run("numbered", store=store, seed=1) as rec:
            for _ in range(2):
                with ThreadPoolExecutor(max_workers=1) as pool:
                    pool.submit(work, 1).result()
            thread = threading.Thread(target=work, args=(2,))
            thread.start()
            thread.join()
        return [e.task for e in _events(store, rec.run_id, ToolCall)]

    first, second = run_once(), run_once()
    assert (
        first
        == second
        == [
            "main/ThreadPoolExecutor-0#1",
            "main/ThreadPoolExecutor-1#1",
            "Thread-1 (work)",
        ]
    )


def test_nested_calls_record_their_parent_span(store: DirectoryStore) -> None:
    @capture.tool
    def inner() -> int:
        return 1

    @capture.tool
    def outer() -> int:
        return inner() + 1

    with capture.run("nested", store=store, seed=1) as rec:
        outer()
    child, parent = _events(store, rec.run_id, ToolCall)
    assert (child.name, parent.name) == ("inner", "outer")
    assert child.parent_span == parent.span and parent.parent_span is None


def test_a_run_inside_a_run_is_a_run_of_its_own(store: DirectoryStore) -> None:
    """A nested ``capture.run`` records the calls made inside it; the outer one, the
    calls made around it."""
    with capture.run("one", store=store, seed=1) as outer:
        lookup(1)
        with capture.run("two", store=store, seed=1) as inner:
            lookup(2)
        lookup(3)
    assert [e.args["order_id"] for e in _events(store, outer.run_id, ToolCall)] == [1, 3]
    assert [e.args["order_id"] for e in _events(store, inner.run_id, ToolCall)] == [2]


def test_events_are_on_disk_before_the_run_ends(store: DirectoryStore) -> None:
    with capture.run("flushed", store=store, seed=1, run_id="flushed"):
        lookup(1)
        raw = (store.run_dir("flushed") / "events.jsonl").read_bytes()
        assert json.loads(raw.splitlines()[-1])["name"] == "lookup"
        assert store.load_manifest("flushed").status == "running"
    assert store.load_manifest("flushed").status == "complete"


def test_package_versions_are_not_taken_for_credentials(
    store: DirectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A distribution whose name reads like a credential field keeps its version in the
    manifest; a known secret in a version is still redacted."""
    site = tmp_path / "site"
    for folder in ("detect_secrets-1.5.0.dist-info", "leaky_pkg-s3cr3tTOKENvalue9.dist-info"):
        (site / folder).mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))
    env = {"LEAKY_API_KEY": "s3cr3tTOKENvalue9"}
    with capture.run("packages", store=store, seed=1, environ=env) as rec:
        pass
    runtime = store.load_manifest(rec.run_id).runtime
    assert runtime is not None
    assert runtime.packages["detect-secrets"] == "1.5.0"
    assert runtime.packages["leaky-pkg"].startswith("<redacted:")
