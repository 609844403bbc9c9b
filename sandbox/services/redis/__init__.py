"""The ``redis`` service kind: the kind itself (:mod:`.kind`, ``KIND``) and its client hooks
(:mod:`.clients`). The kind's names are reached here too (``sandbox.services.redis:KIND``,
``from sandbox.services.redis import RedisKind``), imported on first use: loading the hooks
at capture start does not load the kind (and redis-py) before the agent connects."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("sandbox.services.redis.kind"), name)
