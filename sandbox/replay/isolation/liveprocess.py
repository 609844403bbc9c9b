"""A process the replay starts live (a stdio MCP server made live with ``--live mcp:NAME``)
runs under the replay's frozen clock and seeded entropy, as the agent does.

:func:`live_process_variables` gives the variables for such a process: ``SANDBOX_REPLAY_LIVE``
(JSON: the frozen instant when it starts, a seed; the process is not a replayed child of the
program) and ``TZ``, the replayed run's time zone.
Started with the hook's ``sitecustomize`` on its path (a Python program: see
:func:`sandbox.capture.children.hook_environment`), :func:`start_from_env` freezes its clock
at that instant (:class:`~sandbox.replay.conditions.clock.FrozenClock`, SQLite's ``'now'``
included) and seeds ``random`` and ``uuid4`` from the seed, the same in every replay. Nothing
is recorded in the process: what it answers crosses the agent's boundary.
"""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from datetime import UTC, datetime

from sandbox.capture.children import LIVE_VAR
from sandbox.replay.conditions.clock import FrozenClock, ReplayClock


def live_process_variables(clock: ReplayClock, seed: int | None, name: str) -> dict[str, str]:
    """The variables that put the process ``name`` (a live server) under ``clock`` and the
    run's ``seed`` (``LIVE_VAR`` is always among them: the process is not followed as the
    program's child, :func:`sandbox.capture.children.follow_children`)."""
    settings: dict[str, object] = {}
    if isinstance(clock, FrozenClock):
        settings["at"] = clock.now
    if seed is not None:
        from sandbox.capture.ids import derive_seed

        settings["seed"] = derive_seed(seed, f"live:{name}")
    variables = {LIVE_VAR: json.dumps(settings)}
    if "at" in settings and os.environ.get("TZ"):
        variables["TZ"] = os.environ["TZ"]
    return variables


def start_from_env(environ: MutableMapping[str, str] | None = None) -> FrozenClock | None:
    """In a live process: freeze the clock and seed the generators as
    ``$SANDBOX_REPLAY_LIVE`` says (the variable is removed); the frozen clock, if any."""
    env = os.environ if environ is None else environ
    raw = env.pop(LIVE_VAR, None)
    if not raw:
        return None
    settings = json.loads(raw)
    seed = settings.get("seed")
    if seed is not None:
        import random

        from sandbox.capture.ids import derive_seed, patch_uuid4

        random.seed(int(seed))
        patch_uuid4(derive_seed(int(seed), "uuid4"))
    if settings.get("at") is None:
        return None
    clock = FrozenClock(datetime.fromtimestamp(float(settings["at"]), UTC))
    clock.start()
    return clock
