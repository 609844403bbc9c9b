"""CI shards: ``--shard I/N`` keeps the runs whose id hashes to shard ``I`` of ``N``.

A run's shard is a function of its id alone (the first eight bytes of its SHA-256, modulo
``N``), so adding or removing runs never moves another run to a different shard, and the
``N`` shards of a store are disjoint and together cover it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from sandbox.errors import RegressionError

_SPEC = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class Shard:
    index: int
    """1-based, as CI matrices count."""
    count: int

    @classmethod
    def parse(cls, spec: str) -> Shard:
        """``"I/N"`` with ``1 <= I <= N``; a :class:`RegressionError` naming the form otherwise."""
        match = _SPEC.fullmatch(spec.strip())
        if match is None or not 1 <= int(match[1]) <= int(match[2]):
            raise RegressionError(
                f"invalid shard {spec!r}: expected I/N with 1 <= I <= N, like 2/4"
            )
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, run_id: str) -> bool:
        return shard_of(run_id, self.count) == self.index


def shard_of(run_id: str, count: int) -> int:
    """The 1-based shard of ``count`` that a run id falls in."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1
