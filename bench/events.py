"""Event log throughput: append 10,000 events of mixed kinds through ``RunWriter`` and reload
them with ``store.load``; baseline: plain ``json.dumps``/``json.loads`` of the same dicts to a
file, one line each. Goal: append + reload under 1 s. Rounds alternate the sides after a
warm-up. ``python -m bench.events``"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.compare import compare, ratios, record
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.events import (
    ClockRead,
    ErrorInfo,
    Event,
    HTTPExchange,
    LLMCall,
    MemoryOp,
    RandomDraw,
    RetryAttempt,
    StateTransition,
    ToolCall,
)

QUICK = ["--quick"]
N = 10_000


def make_events(n: int = N) -> list[Event]:
    """``n`` events cycling through eight kinds, with realistic small payloads."""
    out: list[Event] = []
    for seq in range(n):
        common = {"seq": seq, "wall": 1_700_000_000.0 + seq, "mono": seq / 1000, "task": "main"}
        match seq % 8:
            case 0:
                event: Event = LLMCall(
                    **common,
                    name="plan",
                    model="gpt-x",
                    messages=[{"role": "user", "content": f"step {seq}"}],
                    params={"temperature": 0},
                    response={"role": "assistant", "content": "call the tool", "n": seq},
                    usage={"prompt_tokens": 120, "completion_tokens": 12},
                )
            case 1:
                event = ToolCall(
                    **common, name="lookup", args={"id": seq, "q": "order"}, output={"ok": True}
                )
            case 2:
                event = ClockRead(**common, value=1_700_000_000.0 + seq)
            case 3:
                event = RandomDraw(**common, source="uuid4", value=f"{seq:032x}")
            case 4:
                event = MemoryOp(**common, op="write", key=f"k{seq}", value={"v": seq})
            case 5:
                event = HTTPExchange(
                    **common,
                    method="POST",
                    url="http://svc.test/orders",
                    request_headers={"content-type": "application/json"},
                    request_body={"sku": "A1"},
                    status=201,
                    response_body={"id": seq},
                )
            case 6:
                event = RetryAttempt(
                    **common, outcome="error", error=ErrorInfo(type="Timeout", message="slow")
                )
            case _:
                event = StateTransition(**common, source="a", target="b", data={"n": seq})
        out.append(event)
    return out


def _ours(root: Path, events: list[Event]) -> None:
    """Append every event through ``RunWriter`` into a new run, then ``store.load`` it."""
    store = DirectoryStore(root)
    run_id = f"bench-{len(store.run_ids())}"
    with store.begin(Manifest(run_id=run_id, created=datetime.now(UTC))) as writer:
        for event in events:
            writer.append(event)
    loaded = store.load(run_id)
    assert len(loaded.events) == len(events) and loaded.events[-1] == events[-1]


def _plain_json(path: Path, dicts: list[dict[str, Any]]) -> None:
    """The floor: ``json.dumps`` of ready dicts to a file, one a line, and ``json.loads``."""
    with open(path, "w", encoding="utf-8") as f:
        for d in dicts:
            f.write(json.dumps(d) + "\n")
    with open(path, encoding="utf-8") as f:
        back = [json.loads(line) for line in f]
    assert len(back) == len(dicts)


def main(argv: list[str] | None = None) -> int:
    rounds = 3 if argv else 7
    events = make_events()
    dicts = [e.model_dump(mode="json", exclude_defaults=True) for e in events]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ours, plain = compare(
            lambda: _ours(root / "store", events),
            lambda: _plain_json(root / "plain.jsonl", dicts),
            rounds=rounds,
        )
    record(
        f"events: append + reload {N} events",
        ours,
        goal="< 1 s",
        holds=lambda t: t < 1,
        unit=" s",
    )
    record(f"events: append + reload / plain json of {N} dicts", ratios(ours, plain))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
