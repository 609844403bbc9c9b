"""End states diffed row by row: what the replay left in each service against what the
original run left, as rows, keys and files missing, extra or changed.

The quick check comes first: only a service whose end-state hash differs from the recorded
``hash_after`` is described. Its recorded end state (the ``after`` dump) is described by its
service kind from a scratch target beside the replay's endpoint (a ``<db>_sbx_expected``
database, a spare Redis database, a temporary file or folder), the replayed end state from
the endpoint itself, and the two descriptions go through
:func:`~sandbox.replay.judging.divergence.diff_states`::

    diffs = end_state_diffs(store, manifest.services, replayed_services, endpoints)
    diffs[0].describe()   # 'db: tables.orders[1]: removed (was {"id": 2, ...})'

When a service cannot be described (no endpoint, no recorded dump, an unknown kind, a
failing scratch restore) or its descriptions come out equal (a schema change, a cut table),
the hash diff stays: one whole-state difference naming the service.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from sandbox.errors import SandboxError
from sandbox.replay.judging.divergence import StateDiff, diff_state_hashes, diff_states
from sandbox.services.base import DESCRIBE_LIMIT
from sandbox.services.registry import get_kind
from sandbox.snapshot.manifest import ServiceState
from sandbox.snapshot.store import Store

_CACHE_SIZE = 16
_expected_cache: OrderedDict[tuple[str, str, int], dict[str, JsonValue]] = OrderedDict()
"""Descriptions of recorded dumps, by kind, blob digest and limit: the blobs are content
addressed, so N replays of one run restore the recorded end state into a scratch once."""


def describe_recorded(
    state: ServiceState, endpoint: str, store: Store, *, limit: int = DESCRIBE_LIMIT
) -> dict[str, JsonValue] | None:
    """The description of ``state``'s recorded end state (``None`` without an ``after``
    dump), from a scratch target beside ``endpoint``."""
    if state.after is None:
        return None
    key = (state.kind, state.after.sha256, limit)
    found = _expected_cache.get(key)
    if found is None:
        data = store.get_blob(state.after.sha256)
        found = get_kind(state.kind).describe_data(endpoint, data, limit=limit)
        _expected_cache[key] = found
        while len(_expected_cache) > _CACHE_SIZE:
            _expected_cache.popitem(last=False)
    else:
        _expected_cache.move_to_end(key)
    return found


def end_state_diffs(
    store: Store,
    recorded: Sequence[ServiceState],
    replayed: Sequence[ServiceState],
    endpoints: Mapping[str, str],
    *,
    limit: int = DESCRIBE_LIMIT,
) -> list[StateDiff]:
    """The end-state differences of one replayed run: per service whose hash differs, the
    row/key/file-level diff between the recorded and the replayed end state, or the hash
    diff when no finer one can be had. ``replayed`` carries the replay's ``hash_after``."""
    by_name = {s.name: s for s in recorded}
    out: list[StateDiff] = []
    for diff in diff_state_hashes(recorded, replayed):
        state = by_name.get(diff.service)
        endpoint = endpoints.get(diff.service)
        finer: list[StateDiff] = []
        if state is not None and endpoint is not None and state.hash_after is not None:
            try:
                expected = describe_recorded(state, endpoint, store, limit=limit)
                if expected is not None:
                    actual = get_kind(state.kind).describe(endpoint, limit=limit)
                    finer = diff_states({state.name: expected}, {state.name: actual})
            except SandboxError:
                finer = []
        out.extend(finer or [diff])
    return out
