"""Replay policy rules from the command line, in the order they were typed.

``sandbox replay RUN --live tool --recorded 'tool:payments.*' --policy spy=tool:search``:
every rule applies in the order given and the later wins, whichever option carried it
(``--live/--recorded/--spy KIND[:GLOB]`` are short for ``--policy POLICY=KIND[:GLOB]``).
Click keeps the values of each option but not the order across options, so the command is a
:class:`PolicyOrderCommand`, which notes that order while the arguments are parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from sandbox.replay.serving.policy import PolicySet

POLICY_OPTIONS = ("live", "recorded", "spy", "policy")
"""The parameters that carry policy rules (``policy`` as ``POLICY=KIND[:GLOB]``)."""
ORDER_KEY = "sandbox.policy_order"

# The replay's policy options, shared by every command that replays (replay, pytest,
# explain): a parameter named after each of POLICY_OPTIONS, and ``miss``.
LiveOption = Annotated[
    list[str] | None, typer.Option("--live", help="Serve KIND[:GLOB] live (repeatable).")
]
RecordedOption = Annotated[
    list[str] | None,
    typer.Option("--recorded", help="Serve KIND[:GLOB] from the recording (repeatable)."),
]
SpyOption = Annotated[
    list[str] | None,
    typer.Option("--spy", help="Serve KIND[:GLOB] live and report drift (repeatable)."),
]
PolicyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        help="POLICY=KIND[:GLOB] (repeatable). All policy options apply in the order "
        "typed; the later rule wins.",
    ),
]
MissOption = Annotated[
    str,
    typer.Option(
        "--miss",
        help="On a request the recording lacks: fail (stop the run), live (make it for "
        "real: it reaches where it was sent) or position (answer the n-th call of that "
        "name with the n-th recorded one).",
    ),
]


class PolicyOrderCommand(TyperCommand):
    """A command that records, in ``ctx.meta[ORDER_KEY]``, which policy option came when."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        except Exception:  # the real parse below reports the error
            order = []
        ctx.meta[ORDER_KEY] = [p.name for p in order if p.name in POLICY_OPTIONS]
        return super().parse_args(ctx, args)


def ordered_policies(order: Sequence[str], values: Mapping[str, Sequence[str] | None]) -> PolicySet:
    """The rules of the policy options in the order they were typed (``order``: option names,
    one per occurrence); values of an option missing from ``order`` come last."""
    pending = {name: list(values.get(name) or ()) for name in POLICY_OPTIONS}
    tokens: list[str] = []
    for name in order:
        if pending.get(name):
            tokens.append(f"--{name}={pending[name].pop(0)}")
    for name in POLICY_OPTIONS:
        tokens.extend(f"--{name}={value}" for value in pending[name])
    from sandbox.replay.serving.policy import PolicySet

    return PolicySet.from_argv(tokens)
