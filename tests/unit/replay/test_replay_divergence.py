from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from replay_events import clock, llm, reseq, result, tool

from sandbox.replay.judging.divergence import diff_state_hashes, diff_states, first_divergence
from sandbox.replay.judging.jsondiff import MISSING
from sandbox.snapshot.events import ErrorInfo, Event, ToolCall
from sandbox.snapshot.manifest import ServiceState


def original_run() -> list[Event]:
    return [
        llm(0, "Refund order 42"),
        tool(1, "lookup", {"order_id": 42}, output={"status": "paid"}, duration=0.2),
        tool(2, "refund", {"order_id": 42}, output={"ok": True}, duration=1.5),
        clock(3, 1_700_000_100.0),
        llm(4, "Refund done, tell the user"),
        result(5, {"message": "refunded"}),
    ]


def test_the_same_run_logged_again_does_not_diverge() -> None:
    events = original_run()
    replay = [
        e.model_copy(update={"duration": 9.9}) if isinstance(e, ToolCall) else e
        for e in reseq(events)
    ]
    replay[1] = replay[1].model_copy(update={"fingerprint": "0" * 64, "parent": 7})
    assert first_divergence(events, replay) is None


def test_a_changed_output_is_reported_side_by_side() -> None:
    events = original_run()
    replay = reseq(events)
    replay[2] = replay[2].model_copy(
        update={"output": None, "error": ErrorInfo(type="shop.Duplicate", message="twice")}
    )
    div = first_divergence(events, replay)
    assert div is not None
    assert (div.reason, div.step, div.stream, div.occurrence) == (
        "changed",
        2,
        ("main", "tool", "refund"),
        0,
    )
    assert div.expected is not None and div.actual is not None
    assert div.expected.response == {"output": {"ok": True}, "error": None}
    assert [(d.path, d.change) for d in div.diffs] == [
        ("response.output", "changed"),
        ("response.error", "changed"),
    ]
    text = div.describe()
    assert "step 2: call #1 of tool 'refund' in task 'main' differs" in text
    assert "expected: #2 [main] tool refund" in text
    assert 'response.error: null -> {"type": "shop.Duplicate", "message": "twice"}' in text
    assert div.diffs[0].to_json() == {
        "path": "response.output",
        "change": "changed",
        "expected": {"ok": True},
        "actual": None,
    }


def test_a_missing_call_shows_what_the_replay_did_instead() -> None:
    events = original_run()
    replay = reseq([*events[:2], tool(2, "notify", {"order_id": 42}), *events[3:]])
    div = first_divergence(events, replay)
    assert div is not None
    assert (div.reason, div.step, div.stream) == ("missing", 2, ("main", "tool", "refund"))
    assert div.actual is not None and div.actual.name == "notify"
    assert "the replay never made call #1 of tool 'refund'" in div.describe()


def test_an_extra_call_before_any_other_difference_is_first() -> None:
    events = original_run()
    replay = reseq([events[0], tool(1, "audit", {"order_id": 42}), *events[1:]])
    replay[3] = replay[3].model_copy(update={"output": {"ok": False}})  # a later change
    div = first_divergence(events, replay)
    assert div is not None
    assert (div.reason, div.step, div.stream, div.occurrence) == (
        "extra",
        1,
        ("main", "tool", "audit"),
        0,
    )
    # for context, the original's step at the same position in the task
    assert div.expected is not None and div.expected.name == "lookup"
    assert "replay step 1: call #1 of tool 'audit' in task 'main' was not in the original" in (
        div.describe()
    )


def test_an_extra_read_of_the_same_stream_shifts_its_values() -> None:
    events = original_run()
    replay = reseq([events[0], clock(1, 5.0), *events[1:]])
    div = first_divergence(events, replay)
    assert div is not None
    assert (div.reason, div.step, div.stream) == ("changed", 3, ("main", "clock", ""))
    assert [d.path for d in div.diffs] == ["response.value"]


def test_a_truncated_replay_is_missing_its_tail() -> None:
    events = original_run()
    div = first_divergence(events, reseq(events[:4]))
    assert div is not None and (div.reason, div.step) == ("missing", 4)
    assert div.actual is None


def test_ignored_kinds() -> None:
    events = original_run()
    replay = reseq(events)
    replay[3] = clock(3, 0.0)
    assert first_divergence(events, replay) is not None
    assert first_divergence(events, replay, ignore_kinds={"clock"}) is None


def tasks_log(n_tasks: int, per_task: int) -> dict[str, list[Event]]:
    return {
        f"t{t}": [
            tool(0, f"work{i % 3}", {"task": t, "i": i}, output=i * t, task=f"t{t}")
            for i in range(per_task)
        ]
        for t in range(n_tasks)
    }


def interleave(streams: dict[str, list[Event]], rng: random.Random) -> list[Event]:
    queues = {k: list(v) for k, v in streams.items()}
    out: list[Event] = []
    while queues:
        task = rng.choice(sorted(queues))
        out.append(queues[task].pop(0))
        if not queues[task]:
            del queues[task]
    return reseq(out, shift=0.0)


@given(st.integers(1, 4), st.integers(1, 8), st.randoms(use_true_random=False))
def test_other_interleavings_of_tasks_do_not_diverge(
    n_tasks: int, per_task: int, rng: random.Random
) -> None:
    streams = tasks_log(n_tasks, per_task)
    assert first_divergence(interleave(streams, rng), interleave(streams, rng)) is None


@given(st.integers(2, 4), st.integers(2, 8), st.randoms(use_true_random=False), st.data())
def test_a_change_in_one_task_is_found_whatever_the_interleaving(
    n_tasks: int, per_task: int, rng: random.Random, data: st.DataObject
) -> None:
    streams = tasks_log(n_tasks, per_task)
    original = interleave(streams, rng)
    task = data.draw(st.sampled_from(sorted(streams)))
    index = data.draw(st.integers(0, per_task - 1))
    changed = dict(streams)
    changed[task] = list(streams[task])
    changed[task][index] = changed[task][index].model_copy(update={"output": "different"})
    div = first_divergence(original, interleave(changed, rng))
    assert div is not None and div.reason == "changed"
    assert div.expected is not None and div.expected.task == task
    assert div.diffs[0].path == "response.output"
    assert original[div.step].task == task


def test_end_states_diff_by_row_key_and_file() -> None:
    expected = {
        "db": {"orders": [{"id": 1, "refunded": True}, {"id": 2, "refunded": False}]},
        "redis": {"refund:1": "done"},
        "files": {"out/report.txt": "aa11"},
    }
    actual = {
        "db": {
            "orders": [
                {"id": 1, "refunded": True},
                {"id": 3, "refunded": True},
                {"id": 2, "refunded": False},
            ]
        },
        "redis": {"refund:1": "done", "refund:1:again": "done"},
        "cache": {},
    }
    diffs = diff_states(expected, actual)
    assert [(d.service, d.path, d.change) for d in diffs] == [
        ("db", "orders[1]", "added"),
        ("redis", '["refund:1:again"]', "added"),
        ("files", "", "removed"),
        ("cache", "", "added"),
    ]
    assert diffs[0].describe() == 'db: orders[1]: added {"id": 3, "refunded": true}'
    assert diffs[2].to_json() == {
        "service": "files",
        "path": "",
        "change": "removed",
        "expected": {"out/report.txt": "aa11"},
    }
    assert diff_states(expected, expected) == []


def test_state_hashes() -> None:
    a = [ServiceState(name="db", kind="postgres", hash_after="h1")]
    b = [ServiceState(name="db", kind="postgres", hash_after="h2")]
    diffs = diff_state_hashes(a, b)
    assert [(d.service, d.expected, d.actual) for d in diffs] == [("db", "h1", "h2")]
    assert diff_state_hashes(a, a) == []
    assert diff_state_hashes(a, [])[0].actual is MISSING
