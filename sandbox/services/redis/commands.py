"""redis-py's commands seen before they are sent, for a touched capture
(:mod:`sandbox.services.redis.touched`): a client's commands (sync and asyncio), a
pipeline's or transaction's when it executes, a watching pipeline's immediate ones.

Each command is given to the pin of the run in whose context it is sent, for the client's
database. A run whose context sends a command through a client it did not connect itself
(one client or pool shared among runs) is first made to see the connection (``seen``, the
capture's router), so that it captures that service as well. On a replay, ``seen`` is the
replay's router: a pool made before the replay began (a client made at import) is sent to
the sandbox at its first command. Outside any run and for the pins' own commands this costs
one lookup. Capture fails open: an error of its own never reaches the agent's command. A
command answered is counted by a replay (:func:`~sandbox.seam.clients.answered`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from sandbox.seam import boundary
from sandbox.seam.clients import OncePerRun, answered, patch_attribute
from sandbox.services.redis import touched

Seen = Callable[[Any], object]
"""Make the run in context see a connection of this pool (a redis-py connection pool)."""
Commands = Callable[[Any, tuple[object, ...]], list[Sequence[object]]]
"""The commands a client's call sends, from the client and the call's arguments."""

_ROUTED = OncePerRun()
"""The databases each run was made to see."""


def _before(client: Any, commands: Commands, args: tuple[object, ...], seen: Seen) -> Any:
    """Note the commands a client's call with ``args`` sends (``commands`` tells them, only
    when a pin keeps them) for the run in context, and return it (``None``: no run, or the
    pins' own commands)."""
    if touched.inside():
        return None
    run = boundary.current()
    if run is None:
        return None
    try:
        pool = client.connection_pool
        kwargs = pool.connection_kwargs
        if kwargs.get("path"):
            return run  # a unix socket: no pin keys it
        where = touched.address(kwargs.get("host"), kwargs.get("port"), kwargs.get("db"))
        pin = touched.pin_for(run, where)
        if pin is None:
            if not _ROUTED.first(run, where):
                return run
            seen(pool)
            pin = touched.pin_for(run, where)
            if pin is None:
                return run
        for command in commands(client, args):
            pin.touch_command(command)
    except Exception:  # capture fails open: the agent's command goes on
        pass
    return run


def _one(client: Any, args: tuple[object, ...]) -> list[Sequence[object]]:
    return [args]


def _stacked(pipeline: Any, _args: tuple[object, ...]) -> list[Sequence[object]]:
    return [c[0] for c in pipeline.command_stack]  # read before it executes (and empties)


def patch_commands(module: str, seen: Seen, undo: list[Callable[[], None]]) -> None:
    """Patch the client classes of ``module`` (``redis.client`` or ``redis.asyncio.client``)
    so that their commands are noted first, and counted once answered (each change undone
    by a function in ``undo``)."""
    mod = importlib.import_module(module)
    asynchronous = module.startswith("redis.asyncio")

    def make(original: Any, commands: Commands) -> Any:
        if asynchronous:

            async def sent_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                run = _before(self, commands, args, seen)
                value = await original(self, *args, **kwargs)
                answered(run, "Redis")
                return value

            return sent_async

        def sent(self: Any, *args: Any, **kwargs: Any) -> Any:
            run = _before(self, commands, args, seen)
            value = original(self, *args, **kwargs)
            answered(run, "Redis")
            return value

        return sent

    one = functools.partial(make, commands=_one)
    patch_attribute(mod.Redis, "execute_command", one, undo)
    patch_attribute(mod.Pipeline, "immediate_execute_command", one, undo)
    patch_attribute(mod.Pipeline, "execute", functools.partial(make, commands=_stacked), undo)
