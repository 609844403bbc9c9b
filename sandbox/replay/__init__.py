"""Replay: serve each boundary by a policy, match requests against the recording, find the
first divergent step, and judge whether the recorded failure came back.

The engine (:mod:`~sandbox.replay.engine`, with its session, boundary and fork) stands on four
groups, each importing only those before it: :mod:`~sandbox.replay.conditions` (the clock,
faults, order and deadline a run runs under), :mod:`~sandbox.replay.judging` (meaning,
divergence, coverage, the verdict), :mod:`~sandbox.replay.serving` (policies, matching,
routing) and :mod:`~sandbox.replay.isolation` (the replayed process's environment, network
and trust)."""

import sys

from sandbox.replay.boundary import ReplayBoundary, ReplayStopped
from sandbox.replay.engine import replay
from sandbox.replay.judging.divergence import (
    Divergence,
    EventSummary,
    StateDiff,
    diff_state_hashes,
    diff_states,
    first_divergence,
)
from sandbox.replay.judging.jsondiff import MISSING, FieldDiff, json_diff
from sandbox.replay.judging.semantics import BOUNDARY_KINDS, request_of, response_of, semantic_view
from sandbox.replay.judging.verdict import (
    Evaluation,
    ReplayOutcome,
    RunVerdict,
    Verdict,
    evaluate,
    judge,
    predicate_for,
)
from sandbox.replay.plan import ReplayPlan
from sandbox.replay.report import ReplayReport
from sandbox.replay.serving import policy as _policy
from sandbox.replay.serving.matcher import Matcher, MissMode
from sandbox.replay.serving.policy import Policy, PolicyRule, PolicySet, get_policy, policy_names

# Regression tests that `sandbox pytest` wrote before this package was grouped import
# ``sandbox.replay.policy``: that name still gives the module, now in ``serving``.
sys.modules.setdefault(f"{__name__}.policy", _policy)

__all__ = [
    "BOUNDARY_KINDS",
    "MISSING",
    "Divergence",
    "Evaluation",
    "EventSummary",
    "FieldDiff",
    "Matcher",
    "MissMode",
    "Policy",
    "PolicyRule",
    "PolicySet",
    "ReplayBoundary",
    "ReplayOutcome",
    "ReplayPlan",
    "ReplayReport",
    "ReplayStopped",
    "RunVerdict",
    "StateDiff",
    "Verdict",
    "diff_state_hashes",
    "diff_states",
    "evaluate",
    "first_divergence",
    "get_policy",
    "json_diff",
    "judge",
    "policy_names",
    "predicate_for",
    "replay",
    "request_of",
    "response_of",
    "semantic_view",
]
