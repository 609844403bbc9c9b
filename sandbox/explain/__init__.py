"""Explain a failure: the smallest set of recorded conditions that still reproduces it,
found by delta debugging over replays (:mod:`sandbox.explain.trials`)."""

from sandbox.explain.result import Explanation, load_explanation
from sandbox.explain.trials import explain

__all__ = ["Explanation", "explain", "load_explanation"]
