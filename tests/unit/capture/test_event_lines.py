"""Event lines written without building the event's model (every event after the first of
its shape) are the lines the validated model gives, and read back to the same values."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.capture.recorder import fast_dump
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.store import dump_event, parse_event

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(exclude_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    args=st.dictionaries(st.text(max_size=8), JSON, max_size=4),
    output=JSON,
    duration=st.floats(min_value=0, max_value=1e6) | st.sampled_from([1.2e-05, 5e-324, 0.0]),
)
def test_fast_lines_are_the_model_lines(args: dict[str, Any], output: Any, duration: float) -> None:
    fields: dict[str, Any] = {
        "seq": 3,
        "wall": 1764745000.123456,
        "mono": 0.25,
        "task": "main",
        "name": "lookup",
        "fingerprint": "0" * 64,
        "span": 1,
        "parent_span": None,
        "attempt": None,
        "tool_schema": {"name": "lookup", "parameters": {"type": "object"}},
        "args": args,
        "output": output,
        "output_blob": None,
        "started": 0.125,
        "duration": duration,
    }
    line = fast_dump(ToolCall, "tool", fields)
    assert line == dump_event(ToolCall(**fields))
    event = parse_event(line, "events.jsonl")
    assert isinstance(event, ToolCall)
    assert event.args == args and event.output == output and event.duration == duration


def test_values_json_cannot_hold_plainly_still_read_back() -> None:
    """Not-a-number and the infinities are written as Python's ``json`` writes them, a tiny
    float in its shortest form, a large integer whole: each reads back as it was."""
    output = {"nan": math.nan, "inf": math.inf, "ninf": -math.inf, "tiny": 1.2e-05, "big": 2**80}
    line = fast_dump(ToolCall, "tool", {"seq": 0, "wall": 1.0, "mono": 0.0, "output": output})
    assert b"NaN" in line and b"Infinity" in line and b"-Infinity" in line
    event = parse_event(line, "events.jsonl")
    assert isinstance(event, ToolCall) and isinstance(event.output, dict)
    assert math.isnan(event.output["nan"])
    assert event.output["inf"] == math.inf and event.output["ninf"] == -math.inf
    assert event.output["tiny"] == 1.2e-05 and event.output["big"] == 2**80
