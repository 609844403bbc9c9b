"""Reports a person reads: one self-contained HTML page per replay, diff or fork.

::

    from sandbox.report import Comparison, render, write

    page = render(Comparison(run_a, run_b, divergence=div, state_diffs=diffs,
                             labels=("run A", "run B")))
    write("replay.html", *replay_comparison(store, report))   # a replay, with its verdict
"""

from sandbox.report.comparison import Comparison, replay_comparison
from sandbox.report.page import render, write, write_store_report

__all__ = ["Comparison", "render", "replay_comparison", "write", "write_store_report"]
