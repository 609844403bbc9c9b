"""A regression test written by an earlier `sandbox pytest` still imports: its lines name
modules from before the replay package was grouped by concern."""

from __future__ import annotations

import subprocess
import sys

OLD_HEADER = """
from sandbox.replay.engine import replay
from sandbox.replay.policy import PolicySet
from sandbox.snapshot.predicate_syntax import parse_predicate
from sandbox.snapshot.store import open_store
print(PolicySet.__module__, replay.__module__)
"""


def test_a_test_generated_before_the_grouping_still_imports() -> None:
    done = subprocess.run([sys.executable, "-c", OLD_HEADER], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["sandbox.replay.serving.policy", "sandbox.replay.engine"]
