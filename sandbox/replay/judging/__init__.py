"""Judging a replayed run: what an event means, where the run first departs from the
original, how much of the recording it exercised, how the end states differ, and whether the
recorded failure came back (the verdict)."""
