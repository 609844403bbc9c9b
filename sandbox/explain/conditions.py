"""The recorded conditions a replay holds, as groups that a trial can release.

A replay holds the run's world as recorded; each group below can be let go on its own:

| key | held | released |
| --- | --- | --- |
| ``clock`` | clocks frozen at the recorded time | live clocks (agent and containers) |
| ``order`` | the recorded order of concurrent calls enforced | calls run in any order |
| ``faults`` | recorded timeouts and retry failures injected | not injected |
| ``state:SERVICE:PART`` | a table's rows, a Redis key, a file, as captured | removed |
| ``llm:MODEL`` | the model's answers served from the recording | the model called live |
| ``http:HOST`` | the host's responses served from the recording | the host called live |
| ``mcp:SERVER`` | the MCP server served from the recording | the server started or reached |
| ``tool:NAME`` (and ``retrieval``, ``memory``) | served from the recording | run live |

Only what the run has is listed: ``order`` when it ran concurrent calls, ``faults`` when
an attempt failed or timed out, one ``llm``/``http``/``mcp``/``tool`` group per model, host,
server or tool that the baseline policies serve from the recording (tools run live by
default: a tool group shows up when ``--recorded tool:NAME`` is part of the baseline), and
one ``state`` group per part of a service's captured state (:mod:`sandbox.explain.parts`).
"""

from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sandbox.replay.conditions.ordering import Turnstile
from sandbox.replay.serving.mcp import policy_target
from sandbox.replay.serving.policy import PolicySet
from sandbox.replay.serving.routing import canonical_url
from sandbox.snapshot.events import Event, HTTPExchange, RetryAttempt, Timeout
from sandbox.snapshot.manifest import Manifest

SERVED_KINDS = ("llm", "http", "tool", "retrieval", "memory")
"""Kinds whose recorded answers can be served or called live."""


@dataclass(frozen=True)
class Condition:
    """One group of recorded conditions."""

    key: str
    held: str
    """What the replay holds while it is kept: ``the frozen clock (2024-01-31 23:30 UTC)``."""
    released: str
    """What a trial does instead: ``live clocks``."""


@dataclass(frozen=True)
class Release:
    """How a trial replays with some conditions released."""

    policies: PolicySet
    clocks: str = "frozen"
    enforce_order: bool = True
    inject_faults: bool = True
    parts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Service name -> the parts of its state removed after each reset."""


def _escape(name: str) -> str:
    """``name`` as an fnmatch glob that matches only itself."""
    return glob.escape(name)


def _llm_spans(events: Sequence[Event]) -> set[int]:
    """The spans of the HTTP exchanges that carried a model call."""
    return {e.parent_span for e in events if e.kind == "llm" and e.parent_span is not None}


def http_host(url: str) -> str:
    """The host a recorded URL is grouped under (a loopback port dropped, as replay does)."""
    parts = urlsplit(canonical_url(url))
    return f"{parts.scheme}://{parts.netloc}"


def served_groups(events: Sequence[Event], policies: PolicySet) -> list[tuple[str, str]]:
    """``(kind, name)`` of each model, host, MCP server and tool the policies serve from
    the recording, in the order the run first crossed them."""
    transports = _llm_spans(events)
    found: dict[tuple[str, str], None] = {}
    for event in events:
        if event.kind not in SERVED_KINDS:
            continue
        if isinstance(event, HTTPExchange):
            if event.span in transports:
                continue
            host = http_host(event.url)
            name = f"{event.method} {canonical_url(event.url)}"
            if policies.policy_for("http", name).serves_recording:
                found[("http", host)] = None
            continue
        kind, name = policy_target(event.kind, event.name)
        if policies.policy_for(kind, name).serves_recording:
            found[(kind, name)] = None
    return list(found)


def _faults(events: Sequence[Event]) -> list[str]:
    """The recorded faults, as text: each failed retry attempt (and whether its work had
    committed before it timed out), and each timeout outside a retry."""
    timeouts = {e.parent_span: e for e in events if isinstance(e, Timeout)}
    out = []
    for event in events:
        if isinstance(event, RetryAttempt) and event.error is not None:
            timeout = timeouts.pop(event.span, None) if event.span is not None else None
            after = " after its work committed" if timeout and timeout.committed else ""
            out.append(f"{event.name} attempt {event.attempt or '?'}: {event.error.type}{after}")
    out.extend(f"{t.name}: timed out" for t in timeouts.values())
    return out


def conditions_of(
    manifest: Manifest,
    events: Sequence[Event],
    policies: PolicySet,
    parts: Mapping[str, Sequence[str]],
) -> list[Condition]:
    """The groups a run's replay holds (see the module documentation), ``parts`` being each
    service's releasable parts."""
    out: list[Condition] = []
    if manifest.clock is not None:
        start = manifest.clock.start
        out.append(Condition("clock", f"the frozen clock ({start:%Y-%m-%d %H:%M:%S %Z})", "live"))
    if Turnstile(events).active:
        tasks = sorted({e.task for e in events if e.kind in ("tool", "http")})
        out.append(
            Condition(
                "order",
                f"the recorded interleaving of concurrent calls ({', '.join(tasks)})",
                "free",
            )
        )
    faults = _faults(events)
    if faults:
        shown = "; ".join(faults[:3]) + (f"; and {len(faults) - 3} more" if len(faults) > 3 else "")
        out.append(
            Condition("faults", f"the recorded timeouts and retries ({shown})", "not injected")
        )
    kinds = {s.name: s.kind for s in manifest.services}
    for service, names in parts.items():
        for part in names:
            out.append(
                Condition(
                    f"state:{service}:{part}",
                    f"{service} ({kinds.get(service, '?')}) {part} as captured",
                    "removed",
                )
            )
    for kind, name in served_groups(events, policies):
        what = {"llm": "model", "http": "HTTP host", "mcp": "MCP server"}.get(kind, kind)
        out.append(Condition(f"{kind}:{name}", f"{what} {name} served from the recording", "live"))
    return out


def release(baseline: PolicySet, released: Sequence[str]) -> Release:
    """The replay settings with the conditions keyed ``released`` let go."""
    policies = baseline
    clocks = "frozen"
    enforce_order = True
    inject_faults = True
    parts: dict[str, list[str]] = {}
    for key in released:
        kind, _, name = key.partition(":")
        if key == "clock":
            clocks = "live"
        elif key == "order":
            enforce_order = False
        elif key == "faults":
            inject_faults = False
        elif kind == "state":
            service, _, part = name.partition(":")
            parts.setdefault(service, []).append(part)
        elif kind == "http":
            policies = policies.with_rule("live", f"http:* {_escape(name)}/*")
        else:
            policies = policies.with_rule("live", f"{kind}:{_escape(name)}")
    return Release(
        policies,
        clocks,
        enforce_order,
        inject_faults,
        {service: tuple(names) for service, names in parts.items()},
    )
