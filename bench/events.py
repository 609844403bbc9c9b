"""Event log throughput: append 10,000 events of mixed kinds through ``RunWriter`` and reload
them with ``store.load``; baseline: plain ``json.dumps``/``json.loads`` of the same dicts to a
file, one line each. Goal: append + reload under 1 s. ``python -m bench.events``"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

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


def measure(root: Path, events: list[Event]) -> dict[str, float]:
    store = DirectoryStore(root / "store")
    manifest = Manifest(run_id="bench", created=datetime.now(UTC))

    t0 = time.perf_counter()
    with store.begin(manifest) as writer:
        for event in events:
            writer.append(event)
    t1 = time.perf_counter()
    loaded = store.load("bench")
    t2 = time.perf_counter()
    assert len(loaded.events) == len(events) and loaded.events[-1] == events[-1]

    dicts = [e.model_dump(mode="json", exclude_defaults=True) for e in events]
    path = root / "baseline.jsonl"
    t3 = time.perf_counter()
    with open(path, "w", encoding="utf-8") as f:
        for d in dicts:
            f.write(json.dumps(d) + "\n")
    t4 = time.perf_counter()
    with open(path, encoding="utf-8") as f:
        back = [json.loads(line) for line in f]
    t5 = time.perf_counter()
    assert len(back) == len(dicts)
    return {
        "append": t1 - t0,
        "reload": t2 - t1,
        "base_append": t4 - t3,
        "base_reload": t5 - t4,
    }


def main() -> dict[str, float]:
    events = make_events()
    with tempfile.TemporaryDirectory() as tmp:
        best = min(
            (measure(Path(tmp) / str(i), events) for i in range(3)),
            key=lambda r: r["append"] + r["reload"],
        )
    total = best["append"] + best["reload"]
    base = best["base_append"] + best["base_reload"]
    print(f"events: {N} of 8 kinds, best of 3 runs")
    print(f"  RunWriter.append  {best['append']:.3f} s  ({N / best['append']:,.0f} events/s)")
    print(f"  store.load        {best['reload']:.3f} s  ({N / best['reload']:,.0f} events/s)")
    print(f"  append + reload   {total:.3f} s  (goal < 1 s: {'met' if total < 1 else 'MISSED'})")
    print(
        f"  baseline json     {base:.3f} s  (dumps {best['base_append']:.3f} s, "
        f"loads {best['base_reload']:.3f} s)"
    )
    print(
        f"  ratio vs baseline append x{best['append'] / best['base_append']:.1f}, "
        f"reload x{best['reload'] / best['base_reload']:.1f}, total x{total / base:.1f}"
    )
    return best


if __name__ == "__main__":
    main()
