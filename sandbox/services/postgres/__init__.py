"""The ``postgres`` service kind: the kind itself (:mod:`.kind`, ``KIND``) and its client
hooks (:mod:`.clients`). The kind's names are reached here too (``sandbox.services.postgres:KIND``,
``from sandbox.services.postgres import PostgresKind``), imported on first use: loading the
hooks at capture start does not load the kind (and psycopg) before the agent connects."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("sandbox.services.postgres.kind"), name)
