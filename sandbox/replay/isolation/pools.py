"""The agent's connection pools at the start of each run of a replay.

An engine outlives the runs: a SQLAlchemy engine made at import, as services make theirs,
keeps its pool. Before the first run its connections (if any: a program that captured a run
and replays it in the same process) lead to where the capture ran, outside the sandbox; a
statement on them is refused (:mod:`sandbox.services.postgres.clients`) and the run could
not be judged. Between two runs of ``sandbox replay --times N`` the restored services are
reset: a database is dropped and copied again from its restore point, which ends every
session to it, and the next run would fail on a closed connection, with an error the
capture never saw. So before each run the process's engines drop their pools
(``Engine.dispose(close=False)``: the connections are let go, not closed, so an async
engine's need no event loop); each makes new connections, through the replay's routing, to
the sandbox.
"""

from __future__ import annotations

import sys

from sandbox.seam.clients import instances_of


def let_go_of_pools() -> int:
    """Make every SQLAlchemy engine of this process drop its pool; how many did."""
    engine_module = sys.modules.get("sqlalchemy.engine.base")
    if engine_module is None:  # the agent never imported SQLAlchemy
        return 0
    engines = instances_of(engine_module.Engine)
    for engine in engines:
        engine.dispose(close=False)
    return len(engines)
