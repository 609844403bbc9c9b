"""Small event factories shared by the replay unit tests."""

from __future__ import annotations

from typing import Any

from sandbox.snapshot.events import (
    ClockRead,
    ErrorInfo,
    Event,
    FinalResult,
    HTTPExchange,
    LLMCall,
    ToolCall,
)


def llm(seq: int, content: str, reply: str = "ok", task: str = "main", **kw: Any) -> LLMCall:
    return LLMCall(
        seq=seq,
        task=task,
        wall=1_700_000_000.0 + seq,
        mono=float(seq),
        name=kw.pop("name", "chat"),
        model="gpt-test",
        messages=[
            {"role": "system", "content": "You are a shop assistant."},
            {"role": "user", "content": content},
        ],
        params={"temperature": 0},
        response={"content": reply},
        **kw,
    )


def tool(seq: int, name: str, args: dict[str, Any], output: Any = None, **kw: Any) -> ToolCall:
    return ToolCall(
        seq=seq,
        wall=1_700_000_000.0 + seq,
        mono=float(seq),
        name=name,
        args=args,
        output=output,
        **kw,
    )


def clock(seq: int, value: float, task: str = "main") -> ClockRead:
    return ClockRead(seq=seq, task=task, wall=1_700_000_000.0 + seq, mono=float(seq), value=value)


def http(seq: int, url: str, headers: dict[str, str], status: int = 200) -> HTTPExchange:
    return HTTPExchange(
        seq=seq,
        wall=1_700_000_000.0 + seq,
        mono=float(seq),
        name="GET",
        method="GET",
        url=url,
        request_headers=headers,
        status=status,
        response_body={"ok": True},
    )


def result(seq: int, value: Any = None, error: tuple[str, str] | None = None) -> FinalResult:
    return FinalResult(
        seq=seq,
        wall=1_700_000_000.0 + seq,
        mono=float(seq),
        value=value,
        error=ErrorInfo(type=error[0], message=error[1]) if error else None,
    )


def reseq(events: list[Event], shift: float = 1000.0) -> list[Event]:
    """The same events as another run would log them: new seq, times and durations."""
    return [
        e.model_copy(update={"seq": i, "wall": e.wall + shift, "mono": e.mono + shift})
        for i, e in enumerate(events)
    ]
