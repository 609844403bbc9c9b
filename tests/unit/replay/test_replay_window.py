"""A script that opens one run per case, one after another (an eval loop over the OpenAI
SDK), replayed by running it again: only the recorded run's ``capture.run`` block is the
run (the one at its place among the program's blocks); the cases before it run outside it,
and the replay ends with its block. "Gone" is earned only when nothing the program did
before the block could have changed the restored state."""

from __future__ import annotations

import contextvars
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from replay_json_server import json_server

from sandbox.capture.openings import call_label
from sandbox.names import OPENING_CALL_LABEL, OPENING_LABEL, TIMEOUT_FLOOR
from sandbox.replay.conditions.deadline import BEFORE_MAX, default_timeout
from sandbox.replay.window import Window
from sandbox.snapshot.events import LLMCall, ToolCall
from sandbox.snapshot.store import DirectoryStore

SANDBOX = Path(sys.executable).parent / "sandbox"

EVALS = textwrap.dedent(
    """
    import json, pathlib, sys
    import openai
    from sandbox import capture

    client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0)

    @capture.tool
    def refund_limit(order: str) -> int:
        return json.loads(pathlib.Path("limits.json").read_text())[order]

    def ask(order: str) -> str:
        reply = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": f"refund {order}?"}]
        )
        return reply.choices[0].message.content

    for order, cents in json.loads(pathlib.Path("cases.json").read_text()):
        try:
            with capture.run("refund-eval", store="snapshots", keep="failed", packages=False):
                if TOOL_FIRST:
                    limit = refund_limit(order)
                    answer = ask(order)
                else:
                    answer = ask(order)
                    limit = refund_limit(order)
                if cents > limit:
                    raise RuntimeError(f"{order}: refunded {cents} over {limit} ({answer})")
                print(order, "ok", flush=True)
        except Exception as exc:  # an eval harness goes on to the next case
            print("failed:", type(exc).__name__, exc, flush=True)
    print("all cases done", flush=True)
    """
)
CASES = [["o-1", 100], ["o-2", 900], ["o-3", 50]]
LIMITS = {"o-1": 500, "o-2": 300, "o-3": 100}


def _completion(path: str, sent: bytes) -> object:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "yes, refund it"},
                "finish_reason": "stop",
            }
        ],
    }


@pytest.fixture
def model() -> Iterator[ThreadingHTTPServer]:
    with json_server(_completion) as server:
        yield server


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)


def _captured(tmp_path: Path, model: ThreadingHTTPServer, *, tool_first: bool) -> str:
    """Run the evals with the model up, then stop it; the one kept run's id."""
    (tmp_path / "evals.py").write_text(f"TOOL_FIRST = {tool_first}\n{EVALS}")
    (tmp_path / "cases.json").write_text(json.dumps(CASES))
    (tmp_path / "limits.json").write_text(json.dumps(LIMITS))
    url = f"http://127.0.0.1:{model.server_address[1]}"
    done = _run([sys.executable, "evals.py", url], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "o-1 ok",
        "failed: RuntimeError o-2: refunded 900 over 300 (yes, refund it)",
        "o-3 ok",
        "all cases done",
    ]
    model.shutdown()  # every model call of the replay is served from the recording or refused
    model.server_close()
    (kept,) = DirectoryStore(tmp_path / "snapshots").list()
    assert kept.labels[OPENING_LABEL] == "2"
    return kept.run_id


def _replay(tmp_path: Path, run_id: str, times: int = 1) -> tuple[int, dict[str, Any], str]:
    done = _run([str(SANDBOX), "replay", run_id, "--times", str(times), "--json"], tmp_path)
    return done.returncode, json.loads(done.stdout[done.stdout.index("{\n") :]), done.stdout


@pytest.mark.parametrize("tool_first", [False, True])
def test_the_second_case_of_an_eval_loop_replays_alone_and_reproduces(
    tmp_path: Path, model: ThreadingHTTPServer, tool_first: bool
) -> None:
    run_id = _captured(tmp_path, model, tool_first=tool_first)
    shown = _run([str(SANDBOX), "show", run_id], tmp_path).stdout
    assert "replays     its capture.run block number 2 alone" in shown
    code, report, out = _replay(tmp_path, run_id, times=2)
    assert code == 1, report
    assert [r["outcome"] for r in report["verdict"]["runs"]] == ["reproduced"] * 2
    assert report["divergences"] == [None, None]
    store = DirectoryStore(tmp_path / "snapshots")
    for replayed in report["replays"]:
        events = store.load_events(replayed)
        assert [e.args for e in events if isinstance(e, ToolCall)] == [{"order": "o-2"}]
        assert len([e for e in events if isinstance(e, LLMCall)]) == 1
    # the replay of the program ended with the run's block: the third case never ran
    assert "o-3 ok" not in out and "all cases done" not in out


def test_a_fixed_case_is_gone_when_the_cases_before_it_changed_nothing(
    tmp_path: Path, model: ThreadingHTTPServer
) -> None:
    """The case before the run asked the model first: refused (the model is stopped), it
    never reached the tool, and a request refused changes nothing."""
    run_id = _captured(tmp_path, model, tool_first=False)
    (tmp_path / "limits.json").write_text(json.dumps({**LIMITS, "o-2": 1000}))  # the fix
    code, report, _ = _replay(tmp_path, run_id)
    assert code == 0, report
    assert report["verdict"]["outcome"] == "gone"


def test_a_fixed_case_is_not_gone_when_a_case_before_it_crossed_into_state(
    tmp_path: Path, model: ThreadingHTTPServer
) -> None:
    """The case before the run called its tool first (live, against what was restored for
    the run): it may have changed what the run starts from."""
    run_id = _captured(tmp_path, model, tool_first=True)
    (tmp_path / "limits.json").write_text(json.dumps({**LIMITS, "o-2": 1000}))
    code, report, _ = _replay(tmp_path, run_id)
    assert code == 2, report
    (run,) = report["verdict"]["runs"]
    assert run["outcome"] == "inconclusive" and run["reason"] == "outside"
    assert (
        "made 1 crossing(s) outside the recorded run's capture.run block number 2" in run["detail"]
    )


def test_a_program_that_no_longer_reaches_the_run_cannot_be_judged(
    tmp_path: Path, model: ThreadingHTTPServer
) -> None:
    run_id = _captured(tmp_path, model, tool_first=False)
    (tmp_path / "cases.json").write_text(json.dumps(CASES[:1]))  # one case: no second block
    code, report, _ = _replay(tmp_path, run_id)
    assert code == 2, report
    (run,) = report["verdict"]["runs"]
    assert run["outcome"] == "inconclusive" and run["reason"] == "outside"
    assert "never entered its capture.run block number 2" in run["detail"]


def _in_own_context(test: Callable[[], None]) -> None:
    """Each test of the window in a context of its own (it marks the run's block there)."""
    contextvars.copy_context().run(test)


def test_the_window_counts_blocks_and_keeps_blocks_inside_the_run_in_it() -> None:
    def test() -> None:
        window = Window(opening=2)
        assert window.outside and not window.reached  # before any block: outside
        assert window.enter(None) is False and window.leave() is None  # block 1: not the run
        assert window.enter(None) is True and not window.outside and window.reached  # 2
        assert window.enter(None) is True and window.leave() is None  # a block inside it
        assert not window.outside
        assert window.leave() is True  # the run's block ends: its exception is the run's
        window.close()
        assert window.outside
        window.count("clock")
        window.count("tool")
        assert window.crossings_outside == 1

    _in_own_context(test)


def test_a_call_finds_its_block_among_blocks_open_at_once_in_threads() -> None:
    """The run's block is the one its call opened; another thread's block beside it, and
    what that thread does, is outside; a thread the run's block starts is inside."""

    def test() -> None:
        recorded = call_label("quote", ["q-2"], {})
        window = Window(call=recorded)
        seen: dict[str, bool] = {}

        def other() -> None:
            seen["other block is the run"] = window.enter(call_label("quote", ["q-1"], {}))
            seen["other thread outside"] = window.outside

        assert window.enter(call_label("quote", ["q-2"], {})) is True
        started_inside = threading.Thread(
            target=contextvars.copy_context().run, args=(lambda: seen.update(inner=window.outside),)
        )
        started_inside.start()
        started_inside.join()
        beside = threading.Thread(target=other)  # a thread of its own context
        beside.start()
        beside.join()
        assert seen == {
            "inner": False,
            "other block is the run": False,
            "other thread outside": True,
        }
        assert not window.outside and window.leave() is True

    _in_own_context(test)


def test_a_redacted_call_label_matches_the_call_as_the_replay_redacts_it() -> None:
    def test() -> None:
        window = Window(call='{"args":["[REDACTED]"]}')
        assert window.enter('{"args":["sk-secret"]}', lambda text: '{"args":["[REDACTED]"]}')

    _in_own_context(test)


def test_without_a_label_every_block_is_the_run() -> None:
    def test() -> None:
        window = Window()
        assert not window.outside and window.reached
        assert window.enter(None) is True and window.leave() is False
        assert window.enter(None) is True and window.leave() is False and not window.outside

    _in_own_context(test)


def test_the_default_time_limit_counts_what_the_program_ran_before_the_block() -> None:
    assert default_timeout([]) == TIMEOUT_FLOOR
    assert default_timeout([], before=30.0) == TIMEOUT_FLOOR + 60.0
    # a service's request comes after the whole time the service ran: bounded
    assert default_timeout([], before=3 * 86400.0) == TIMEOUT_FLOOR + BEFORE_MAX


QUOTES = textwrap.dedent(
    """
    import json, pathlib
    from concurrent.futures import ThreadPoolExecutor
    from sandbox import capture

    @capture.tool
    def price(sku: str) -> int:
        return json.loads(pathlib.Path("prices.json").read_text())[sku]

    @capture.run("quote", store="snapshots", keep="failed", packages=False)
    def quote(sku: str, qty: int) -> int:
        total = price(sku) * qty
        if total > 1000:
            raise RuntimeError(f"{sku}: quoted {total} over the limit")
        return total

    if __name__ == "__main__":
        print("a", quote("a", 2), flush=True)  # a warm-up order first
        orders = [("b", 30), ("c", 1), ("d", 4), ("e", 9)]
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(quote, sku, qty) for sku, qty in orders]
        for (sku, _), future in zip(orders, futures):
            print(sku, future.exception() or future.result(), flush=True)
    """
)


def test_a_call_of_a_scripts_function_from_its_threads_replays_alone(tmp_path: Path) -> None:
    """Calls of the script's decorated function, one first, then four in four threads, one
    of them failing: the kept run is found again by its call (its place among the blocks
    may differ in the threads' race), reproduces, and records its own tool call only;
    fixed, the first call's tool call before it keeps it from "gone"."""
    (tmp_path / "quotes.py").write_text(QUOTES)
    prices = {"a": 10, "b": 50, "c": 7, "d": 3, "e": 1}
    (tmp_path / "prices.json").write_text(json.dumps(prices))
    done = _run([sys.executable, "quotes.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "b b: quoted 1500 over the limit" in done.stdout
    store = DirectoryStore(tmp_path / "snapshots")
    (kept,) = store.list()
    assert json.loads(kept.labels[OPENING_CALL_LABEL]) == {
        "function": "quote",
        "args": ["b", 30],
        "kwargs": {},
    }
    code, report, _ = _replay(tmp_path, kept.run_id, times=2)
    assert code == 1, report
    assert [r["outcome"] for r in report["verdict"]["runs"]] == ["reproduced"] * 2
    for replayed in report["replays"]:
        tools = [e for e in store.load_events(replayed) if isinstance(e, ToolCall)]
        assert [e.args for e in tools] == [{"sku": "b"}]
    (tmp_path / "prices.json").write_text(json.dumps({**prices, "b": 5}))  # the fix
    code, report, _ = _replay(tmp_path, kept.run_id)
    (run,) = report["verdict"]["runs"]
    assert code == 2 and run["reason"] == "outside", report
    assert 'block of the call quote("b", 30)' in run["detail"]
