"""Forks: a run replayed from its recording up to a step and live from that step on,
optionally with one recorded response replaced, or the model or its parameters changed.

**Steps.** A step is an event's sequence number: the ``seq`` column ``sandbox show RUN``
prints (``sandbox show RUN --kind llm --kind tool`` lists the model and tool calls only).

**Before the fork** every crossing is served as in a replay, by the chosen policies
(defaults: model and HTTP calls from the recording, tools live against the restored
services, so the services' state at the fork is what it was in the run; recorded faults
injected at the same attempts).

**At the fork and after it** model calls go live (to the model the agent calls, with
``--model`` and ``--param`` applied), retry attempts are no longer failed as recorded, and
every other kind follows the policies; a request the recording cannot answer is served
live instead of stopping the run (the network guard still refuses anything outside the
sandbox that no policy makes live). Clock and random draws stay as recorded. A crossing is
at the fork when its recorded counterpart is at or after the fork step, or when the
recording has no counterpart for it (the run has already left the recorded path); from
then on the whole run is past the fork.

**Overrides** (``--override STEP=VALUE``, see :mod:`sandbox.replay.serving.overrides`) replace the
recorded response at STEP, which is served from the recording whatever its policy (a tool
does not run); without ``--until`` the fork is the step after the last override.

The edits are stored with the fork (:class:`~sandbox.snapshot.manifest.ForkEdits` in its
manifest, ``replay_of`` naming the parent), and every crossing's event says how it was
served (``served``: ``recorded``, ``live`` or ``override``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from sandbox.errors import ForkError
from sandbox.replay.serving.overrides import PutBlob, override_event
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.events import Event, HTTPExchange, LLMCall
from sandbox.snapshot.manifest import ForkEdits, ForkOverride

AFTER_THE_FORK = (("live", "llm"), ("live", "retry"))
"""The policy rules added at the fork: live model calls, no injected faults."""


# --- parsing what the user typed -----------------------------------------------------------


def _json_or_text(text: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value


def parse_override(text: str) -> ForkOverride:
    """``'11={"eligible": false}'`` or ``'11=answer.json'`` (a file of JSON, or of text)."""
    step, sep, value = text.partition("=")
    if not sep or not step.strip().isdigit():
        raise ForkError(
            f"override {text!r}: write STEP=JSON or STEP=FILE, STEP being a seq that "
            "'sandbox show RUN' prints"
        )
    path = Path(value)
    if value and not value.lstrip().startswith(("{", "[", '"')) and path.is_file():
        try:
            content = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ForkError(f"override {step}: cannot read {value}: {exc}") from None
        return ForkOverride(step=int(step), value=_json_or_text(content))
    try:
        parsed: JsonValue = json.loads(value)
    except ValueError:
        raise ForkError(
            f"override {step}: {value[:60]!r} is neither JSON nor a file (a string is "
            "written in quotes: '\"text\"')"
        ) from None
    return ForkOverride(step=int(step), value=parsed)


def parse_param(text: str) -> tuple[str, JsonValue]:
    """``'temperature=0.7'`` -> ``('temperature', 0.7)``; a value that is not JSON is text."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ForkError(f"parameter {text!r}: write KEY=VALUE, e.g. temperature=0.7")
    return key.strip(), _json_or_text(value)


def fork_edits(
    *,
    until: int | None = None,
    overrides: Sequence[str] = (),
    model: str | None = None,
    params: Sequence[str] = (),
) -> ForkEdits | None:
    """The edits the command line gives, or ``None`` when it gives none (a plain replay)."""
    if until is None and not overrides and model is None and not params:
        return None
    return ForkEdits(
        until=until,
        overrides=[parse_override(text) for text in overrides],
        model=model,
        params=dict(parse_param(text) for text in params),
    )


def stored_edits(edits: ForkEdits, key: bytes) -> ForkEdits:
    """The edits as a fork's manifest keeps them: every string redacted as an event is (a
    secret typed into an override is stored as its placeholder)."""
    from sandbox.redaction import Redactor

    return ForkEdits.model_validate(Redactor(key=key).value(edits.model_dump(mode="json")))


def describe_edits(edits: ForkEdits) -> str:
    """``until step 13; step 11 overridden; model gpt-4o; temperature=0.2``."""
    parts = [] if edits.until is None else [f"live from step {edits.until}"]
    parts.extend(f"step {o.step} overridden" for o in edits.overrides)
    if edits.model is not None:
        parts.append(f"model {edits.model}")
    parts.extend(f"{k}={json.dumps(v)}" for k, v in edits.params.items())
    return "; ".join(parts)


# --- the fork point ------------------------------------------------------------------------


class Fork:
    """The edited recording and the state of one fork run: whether it is past the fork."""

    def __init__(
        self,
        edits: ForkEdits,
        recording: Sequence[Event],
        policies: PolicySet,
        blobs: Callable[[str], bytes],
        put_blob: PutBlob,
    ) -> None:
        self.edits = edits
        by_seq = {event.seq: event for event in recording}
        exchanges = {
            e.span: e for e in recording if isinstance(e, HTTPExchange) and e.span is not None
        }
        replaced: dict[int, Event] = {}
        overridden: set[int] = set()
        for override in edits.overrides:
            event = _model_call_of(_step(by_seq, override.step), recording)
            for new in override_event(event, override.value, exchanges, blobs, put_blob):
                replaced[new.seq] = new
            overridden.add(event.seq)
        self.recording: list[Event] = [replaced.get(e.seq, e) for e in recording]
        self.overridden = frozenset(overridden)
        last = max(overridden, default=None)
        if edits.until is not None:
            self.at = edits.until
        else:
            self.at = 0 if last is None else last + 1
        if last is not None and last >= self.at:
            raise ForkError(
                f"step {last} is overridden but the fork is at step {self.at}: an overridden "
                "step must come before --until"
            )
        self.after = policies
        for policy, spec in AFTER_THE_FORK:
            self.after = self.after.with_rule(policy, spec)
        self._past = self.at == 0
        self._lock = threading.Lock()

    @property
    def past(self) -> bool:
        """Whether the run has reached the fork."""
        return self._past

    def reached(self, counterpart: Event | None, *, latch_on_miss: bool) -> bool:
        """Whether a crossing whose recorded counterpart is ``counterpart`` (``None``: the
        recording has none) is at or after the fork; once one is, all later ones are."""
        with self._lock:
            if not self._past:
                if counterpart is None:
                    self._past = latch_on_miss
                else:
                    self._past = counterpart.seq >= self.at
            return self._past

    def request_body(self, body: Any) -> Any:
        """A live model request with the fork's model and parameters."""
        if not isinstance(body, dict) or (self.edits.model is None and not self.edits.params):
            return body
        edited = dict(body)
        if self.edits.model is not None:
            edited["model"] = self.edits.model
        edited.update(self.edits.params)
        return edited


def _step(by_seq: dict[int, Event], step: int) -> Event:
    event = by_seq.get(step)
    if event is None:
        last = max(by_seq, default=-1)
        raise ForkError(
            f"step {step} is not in the run (its steps are 0..{last}: 'sandbox show RUN' "
            "lists them)"
        )
    return event


def _model_call_of(event: Event, recording: Sequence[Event]) -> Event:
    """The model call an HTTP exchange carried (the step named either), else the event."""
    if isinstance(event, HTTPExchange) and event.span is not None:
        for other in recording:
            if isinstance(other, LLMCall) and other.parent_span == event.span:
                return other
    return event
