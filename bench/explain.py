"""How many trials ddmin runs against a one-condition-at-a-time search, as the number of
recorded conditions grows: ``python -m bench.explain``.

The trials are decided by a rule (which conditions the failure needs), so the figures are
counts, not times: a trial is N replays either way. The one-at-a-time search runs the trial
with everything held, then one per condition released alone; it finds each condition the
failure needs on its own, but not a set that is needed together (either of two conditions
suffices: releasing one at a time never shows either). ddmin's count includes its trial
with everything released and the trials that confirm each kept condition.
"""

from __future__ import annotations

import statistics

from sandbox.explain.ddmin import Search, TrialOutcome, classify, ddmin

SIZES = (4, 8, 16, 32, 64)


def ddmin_trials(n: int, needed: frozenset[str]) -> tuple[int, list[str]]:
    keys = [f"c{i}" for i in range(n)]
    ran: list[frozenset[str]] = []

    def trial(kept: frozenset[str]) -> TrialOutcome:
        ran.append(kept)
        return "reproduced" if needed <= kept else "not reproduced"

    search = Search(trial, lambda: True)
    search.test(frozenset(keys))  # the trial with everything held, as explain runs first
    kept, _ = ddmin(keys, search)
    classify(kept, keys, search)
    return len(ran), sorted(kept)


def main() -> int:
    print(f"{'conditions':>10}  {'needed':>6}  {'ddmin':>6}  {'one at a time':>13}  ratio")
    ratios = []
    for n in SIZES:
        for k in (1, 2):
            needed = frozenset(f"c{(i * 7 + 3) % n}" for i in range(k))
            trials, kept = ddmin_trials(n, needed)
            assert kept == sorted(needed)
            ratio = trials / (1 + n)
            ratios.append(ratio)
            print(f"{n:>10}  {k:>6}  {trials:>6}  {1 + n:>13}  {ratio:.2f}")
    print(
        f"ddmin / one-at-a-time trials: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
