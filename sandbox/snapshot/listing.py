"""Summaries of the runs in a store, and one-line summaries of events, for listings."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sandbox.errors import SnapshotError, UnknownRunError
from sandbox.processes import pid_alive
from sandbox.snapshot.events import Event
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.snapshot import iter_blob_refs
from sandbox.snapshot.store import MANIFEST, Store

RunState = Literal["running", "incomplete", "complete", "damaged"]


def run_state(
    manifest: Manifest,
    *,
    hostname: str | None = None,
    alive: Callable[[int], bool] = pid_alive,
) -> RunState:
    """``complete``; ``damaged`` when its capture failed; ``running`` while its capturing
    process lives on this host; otherwise ``incomplete`` (a capture that died, or one
    recorded on another host)."""
    if manifest.status == "complete":
        return "complete"
    if manifest.status == "damaged":
        return "damaged"
    here = hostname if hostname is not None else socket.gethostname()
    if manifest.pid is not None and manifest.host in (None, here) and alive(manifest.pid):
        return "running"
    return "incomplete"


def entrypoint_text(manifest: Manifest) -> str:
    entry = manifest.entrypoint
    if entry is None:
        return ""
    if entry.kind == "callable":
        return entry.target or ""
    return " ".join(entry.command)


def failure_text(manifest: Manifest) -> str:
    failure = manifest.failure
    if failure is None or not failure.observed:
        return ""
    if failure.reason:
        return failure.reason
    if failure.error is not None:
        return f"{failure.error.type}: {failure.error.message}"
    return "failure observed"


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    created: datetime | None
    entrypoint: str
    events: int | None
    """From the manifest; ``None`` while a run is not sealed (its log is not read)."""
    state: RunState
    failure: str
    """The failure the run showed; for a ``damaged`` run, what is wrong with it."""
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "created": self.created.isoformat() if self.created else None,
            "entrypoint": self.entrypoint,
            "events": self.events,
            "status": self.state,
            "failure": self.failure,
            "size": self.size,
        }


def summarize_run(
    store: Store,
    manifest: Manifest,
    *,
    hostname: str | None = None,
    alive: Callable[[int], bool] = pid_alive,
) -> RunSummary:
    """A run's summary from its manifest alone (the event log is never read)."""
    blobs = manifest.blob_bytes
    if blobs is None:  # sealed before blob_bytes existed: the manifest's own blobs only
        blobs = sum({r.sha256: r.size for r in iter_blob_refs([manifest])}.values())
    return RunSummary(
        run_id=manifest.run_id,
        created=manifest.created,
        entrypoint=entrypoint_text(manifest),
        events=manifest.event_count,
        state=run_state(manifest, hostname=hostname, alive=alive),
        failure=failure_text(manifest),
        size=store.run_bytes(manifest.run_id) + blobs,
    )


def damaged_run(store: Store, run_id: str, reason: str) -> RunSummary:
    return RunSummary(
        run_id=run_id,
        created=None,
        entrypoint="",
        events=None,
        state="damaged",
        failure=cut(reason, 200),
        size=store.run_bytes(run_id),
    )


def cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize_runs(
    store: Store,
    *,
    hostname: str | None = None,
    alive: Callable[[int], bool] = pid_alive,
) -> list[RunSummary]:
    """One summary per run folder, oldest first, damaged runs (a manifest that is missing,
    unreadable or invalid) last, each with its reason. Reads manifests only; leftovers of
    killed writers are cleaned first."""
    store.clean_stale()
    good: list[RunSummary] = []
    damaged: list[RunSummary] = []
    for run_id in store.run_ids():
        try:
            manifest = store.load_manifest(run_id)
        except UnknownRunError:
            continue  # removed since the folder was listed
        except SnapshotError as exc:
            damaged.append(damaged_run(store, run_id, str(exc)))
            continue
        except OSError as exc:
            damaged.append(damaged_run(store, run_id, f"{MANIFEST}: unreadable ({exc.strerror})"))
            continue
        good.append(summarize_run(store, manifest, hostname=hostname, alive=alive))
    good.sort(key=lambda s: (s.created, s.run_id))
    return good + damaged


def _short(value: object, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def event_summary(event: Event, width: int = 60) -> str:
    """A short, human summary of one event for a timeline."""
    error = getattr(event, "error", None)
    if error is not None:
        return _short(f"error {error.type}: {error.message}", width)
    match event.kind:
        case "llm":
            return _short(f"{event.model} → {_short(event.response, width)}", width)
        case "tool":
            out: object = event.output
            if event.output_blob is not None:
                out = f"<blob {event.output_blob.size} B>"
            return _short(f"{_short(event.args, width // 2)} → {_short(out, width)}", width)
        case "retrieval":
            return _short(f"{_short(event.query, width // 2)} → {len(event.documents)} doc(s)")
        case "memory":
            return _short(f"{event.op} {event.key}", width)
        case "http":
            return _short(f"{event.method} {event.url} → {event.status}", width)
        case "clock":
            return _short(f"{event.source} = {event.value}", width)
        case "random":
            return _short(f"{event.source} seed={event.seed} value={_short(event.value)}", width)
        case "retry":
            return _short(f"{event.outcome}, wait {event.wait:g}s", width)
        case "timeout":
            return _short(f"after {event.after:g}s, committed={event.committed}", width)
        case "state":
            return _short(f"{event.source or '∅'} → {event.target}", width)
        case "result":
            return _short(event.value, width)
    return ""  # pragma: no cover - every kind is handled above
