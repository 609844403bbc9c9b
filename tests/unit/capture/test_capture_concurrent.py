"""Many runs captured at once in one process, as a web service handles requests: each
``capture.run`` is its own run (asyncio tasks, threads, ``to_thread``, executors), holding
exactly its own events, with shared clients made at start-up attributed to the run using
them; a call made outside any run is not recorded."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from sandbox import capture
from sandbox.capture.threads import THREADS
from sandbox.snapshot.events import HTTPExchange, LLMCall, ToolCall
from sandbox.snapshot.store import DirectoryStore
from tests.unit.capture.conftest import FakeAPI


@capture.tool
def lookup(x: int) -> dict[str, int]:
    time.sleep(0.005)  # long enough for the runs to interleave
    return {"x": x}


def _tool_args(store: DirectoryStore, run_id: str) -> list[int]:
    return sorted(int(e.args["x"]) for e in store.load_events(run_id) if isinstance(e, ToolCall))


def _by_name(store: DirectoryStore) -> dict[str, str]:
    return {m.name: m.run_id for m in store.list()}


def test_asyncio_tasks_each_record_their_own_run(store: DirectoryStore) -> None:
    """Six requests handled by asyncio tasks at once, each calling tools through
    ``asyncio.to_thread``: six complete runs, each with its own two calls only."""

    async def handle(i: int) -> str:
        with capture.run(f"req{i}", store=store, services="none") as rec:
            await asyncio.to_thread(lookup, i)
            await asyncio.sleep(0.01)
            await asyncio.to_thread(lookup, 100 + i)
            return rec.run_id

    async def serve() -> list[str]:
        return await asyncio.gather(*(handle(i) for i in range(6)))

    run_ids = asyncio.run(serve())
    assert len(set(run_ids)) == 6
    for i, run_id in enumerate(run_ids):
        assert store.load_manifest(run_id).status == "complete"
        assert _tool_args(store, run_id) == [i, 100 + i]


def test_threads_each_record_their_own_run(store: DirectoryStore) -> None:
    def handle(i: int) -> None:
        with capture.run(f"thr{i}", store=store, services="none"):
            lookup(i)
            lookup(100 + i)

    threads = [threading.Thread(target=handle, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runs = _by_name(store)
    assert sorted(runs) == [f"thr{i}" for i in range(4)]
    for i in range(4):
        assert store.load_manifest(runs[f"thr{i}"]).status == "complete"
        assert _tool_args(store, runs[f"thr{i}"]) == [i, 100 + i]


def test_threads_and_pool_work_started_inside_a_run_belong_to_it(
    store: DirectoryStore,
) -> None:
    """A ``threading.Thread`` and an executor's work started in a run are recorded into it;
    the same pool's work submitted outside any run afterwards is not recorded anywhere."""
    pool = ThreadPoolExecutor(max_workers=1)  # made before the run, as at start-up
    with capture.run("inherits", store=store, services="none") as rec:
        worker = threading.Thread(target=lookup, args=(1,))
        worker.start()
        worker.join()
        pool.submit(lookup, 2).result()
    pool.submit(lookup, 3).result()  # the pool's worker thread was started in the run
    lookup(4)
    pool.shutdown()
    assert _tool_args(store, rec.run_id) == [1, 2]
    assert [m.run_id for m in store.list()] == [rec.run_id]


def test_a_call_outside_any_run_is_not_recorded_while_runs_record(
    store: DirectoryStore,
) -> None:
    inside = threading.Event()
    done = threading.Event()

    def handle() -> None:
        with capture.run("busy", store=store, services="none"):
            lookup(1)
            inside.set()
            done.wait(5)

    t = threading.Thread(target=handle)
    t.start()
    inside.wait(5)
    lookup(2)  # this thread is in no run
    done.set()
    t.join()
    assert _tool_args(store, _by_name(store)["busy"]) == [1]


def test_a_shared_httpx_client_is_attributed_to_the_run_using_it(
    store: DirectoryStore, fake_api: FakeAPI
) -> None:
    """One ``httpx.Client`` made at start-up, used by four threads each in its own run:
    each run holds exactly the requests it made."""
    client = httpx.Client(base_url=fake_api.url)

    def handle(i: int) -> None:
        with capture.run(f"http{i}", store=store, services="none"):
            for n in range(3):
                assert client.get(f"/r{i}/{n}").json()["ok"] is True

    threads = [threading.Thread(target=handle, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.get("/outside")  # after the runs, in no run
    client.close()
    runs = _by_name(store)
    for i in range(4):
        urls = [e.url for e in store.load_events(runs[f"http{i}"]) if isinstance(e, HTTPExchange)]
        assert urls == [f"{fake_api.url}/r{i}/{n}" for n in range(3)]


def test_a_shared_async_openai_client_is_attributed_to_the_run_using_it(
    store: DirectoryStore, fake_api: FakeAPI
) -> None:
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=f"{fake_api.url}/v1", max_retries=0)

    async def handle(i: int) -> None:
        with capture.run(f"llm{i}", store=store, services="none"):
            await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"question {i}"}]
            )

    async def serve() -> None:
        await asyncio.gather(*(handle(i) for i in range(4)))
        await client.close()

    asyncio.run(serve())
    runs = _by_name(store)
    for i in range(4):
        calls = [e for e in store.load_events(runs[f"llm{i}"]) if isinstance(e, LLMCall)]
        assert len(calls) == 1
        message: Any = calls[0].messages[0]
        assert message["content"] == f"question {i}"


def test_a_run_is_refused_while_a_process_wide_boundary_is_installed(
    store: DirectoryStore,
) -> None:
    """A captured command (or a replay that is not a hand-over) holds the whole process:
    ``capture.run`` inside it is refused with one clear error, and records nothing."""
    from sandbox.capture.recorder import Recorder
    from sandbox.errors import CaptureError
    from sandbox.seam import boundary

    with capture.run("host", store=store, services="none") as rec:
        pass
    writer = store.resume(rec.run_id)
    uninstall = boundary.install(Recorder(writer, store))
    try:
        with (
            pytest.raises(CaptureError, match="refused"),
            capture.run("inner", store=store, services="none"),
        ):
            pass
    finally:
        uninstall()
        writer.close()
    assert [m.name for m in store.list()] == ["host"]


def test_runs_with_other_settings_share_each_patch_and_the_last_holder_undoes_it(
    store: DirectoryStore,
) -> None:
    """A run holds the process-wide patches as one hold of the set for its settings; runs
    with other settings hold each patch they share on its own count. A run recording HTTP
    opened under one that does not: the transport is patched while it runs and restored
    when it ends, while the outer run's entropy patch stays until that one ends too; a
    third run with the inner one's settings takes no further hold of any patch."""
    held = THREADS.holders
    transport = httpx.HTTPTransport.handle_request
    urandom = os.urandom
    with capture.run("outer", store=store, services="none", http=False):
        assert os.urandom is not urandom  # entropy patched for the outer run
        assert httpx.HTTPTransport.handle_request is transport  # no HTTP recording asked
        with capture.run("inner", store=store, services="none"):
            assert httpx.HTTPTransport.handle_request is not transport
            patched_urandom = os.urandom
            assert THREADS.holders == held + 2  # one hold for each set of settings
            with capture.run("third", store=store, services="none"):
                assert THREADS.holders == held + 2
        assert httpx.HTTPTransport.handle_request is transport  # its last holder ended
        assert os.urandom is patched_urandom  # still held by the outer run
    assert os.urandom is urandom
    assert httpx.HTTPTransport.handle_request is transport


def test_of_runs_starting_together_only_the_first_seeds_the_global_generators(
    store: DirectoryStore,
) -> None:
    """``random`` is seeded (a ``random.seed`` crossing the run records) only by a run that
    starts while no other records: twenty runs started at once in threads, each open until
    all have started, three rounds one after the other, make exactly one seeding run a
    round (several looked, saw none recording, and each reseeded the generator under the
    others)."""
    from sandbox.snapshot.events import RandomDraw

    for round_ in range(3):
        start, inside = threading.Barrier(20), threading.Barrier(20)

        def handle(
            i: int,
            round_: int = round_,
            start: threading.Barrier = start,
            inside: threading.Barrier = inside,
        ) -> None:
            start.wait()
            with capture.run(f"r{round_}-{i}", store=store, services="none"):
                inside.wait(30)  # none leaves before all have started
                lookup(i)

        threads = [threading.Thread(target=handle, args=(i,)) for i in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    runs = store.list()
    assert len(runs) == 60
    seeding = sorted(
        m.name.split("-")[0]
        for m in runs
        if any(
            isinstance(e, RandomDraw) and e.name == "random.seed"
            for e in store.load_events(m.run_id)
        )
    )
    assert seeding == ["r0", "r1", "r2"]


def quote(x: int) -> dict[str, int]:
    """A replayable call (a module function): one tool call."""
    return lookup(x)


def test_a_run_that_began_under_another_replays_without_seeding_the_generators(
    store: DirectoryStore,
) -> None:
    """A run that started while another recorded did not seed ``random`` (no ``random.seed``
    crossing in its log, no ``random`` seed in its manifest); its replay does not either, so
    it replays without a divergence (it replayed with one, a crossing the recording lacks,
    ``random.seed``), and two replays draw alike from the generator."""
    from sandbox.replay import replay
    from sandbox.snapshot.events import RandomDraw
    from sandbox.snapshot.manifest import Entrypoint

    entry = Entrypoint(kind="callable", target=f"{__name__}:quote", args=[7])
    outer = capture.run("outer", store=store, services="none", packages=False)
    inner_run = capture.run("inner", store=store, services="none", packages=False, entrypoint=entry)
    with outer, inner_run as inner:
        capture.result(quote(7))  # as its replay, which returns it, records it
        capture.mark_failed("seen once")  # judged by a mark again: the replay is gone
    manifest = store.load_manifest(inner.run_id)
    assert "random" not in manifest.seeds
    logged = store.load_events(inner.run_id)
    assert not any(isinstance(e, RandomDraw) and e.name == "random.seed" for e in logged)

    report = replay(inner.run_id, store=store, times=2)
    assert report.divergences == [None, None], report.describe()
    assert report.verdict.gone == 2, report.describe()
    for replayed in report.replays:
        events = store.load_events(replayed)
        assert not any(isinstance(e, RandomDraw) and e.name == "random.seed" for e in events)


def test_each_run_counts_the_runs_that_recorded_alongside_it(store: DirectoryStore) -> None:
    """Of three runs, ``a`` alone first, then ``b`` and ``c`` overlapping each other:
    ``b`` and ``c`` each count one other run (their end states may hold its writes: a
    replay says so when an end state differs); ``a`` counts none and carries no label."""
    from sandbox.names import OVERLAPPED_LABEL

    with capture.run("a", store=store, services="none", packages=False):
        lookup(0)
    inside, leave = threading.Event(), threading.Event()

    def b() -> None:
        with capture.run("b", store=store, services="none", packages=False):
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=b)
    worker.start()
    assert inside.wait(10)
    with capture.run("c", store=store, services="none", packages=False):
        lookup(1)
    leave.set()
    worker.join()
    labels = {m.name: m.labels.get(OVERLAPPED_LABEL) for m in store.list()}
    assert labels == {"a": None, "b": "1", "c": "1"}
