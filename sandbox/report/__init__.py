"""Reports a person reads: one self-contained HTML page per replay, diff or fork.

::

    from sandbox.report import Comparison, render, write

    page = render(Comparison(run_a, run_b, divergence=div, state_diffs=diffs,
                             labels=("run A", "run B")))
    write("replay.html", *replay_comparison(store, report))   # a replay, with its verdict
    write("diff.html", diff_comparison(store, compare_runs(store, a, b)))   # sandbox diff
"""

from sandbox.report.comparison import Comparison, diff_comparison, replay_comparison
from sandbox.report.page import render, write, write_store_report

__all__ = [
    "Comparison",
    "diff_comparison",
    "render",
    "replay_comparison",
    "write",
    "write_store_report",
]
