"""The README's own capture example (``shop.py``: ``@capture.run``, run with
``python -c "import shop; shop.main()"``) replays and reproduces: inside a replay,
``capture.run`` hands over to the replay session instead of starting a second capture."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox.snapshot.store import DirectoryStore

README = Path(__file__).resolve().parents[3] / "README.md"
SANDBOX = Path(sys.executable).parent / "sandbox"

CONTEXT_SHOP = textwrap.dedent(
    """
    from sandbox import capture


    @capture.tool
    def place_order(sku: str, qty: int) -> dict:
        return {"order_id": 42, "sku": sku, "qty": qty}


    def main() -> None:
        with capture.run("checkout", store="snapshots", seed=7) as rec:
            first = place_order("A1", 1)
            second = place_order("A1", 1)
            rec.set_result({"orders": [first, second]})
            rec.mark_failed(
                "order placed twice",
                capture.ResultPredicate(path="orders.1.sku", op="eq", value="A1"),
            )
    """
)


def readme_shop() -> str:
    """The ``shop.py`` block of the README, as a user would copy it."""
    found = re.search(r"```python\n(# shop\.py\n.*?)```", README.read_text(), re.S)
    assert found is not None, "the README lost its shop.py example"
    return found.group(1)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("form", ["decorator", "context manager"])
def test_readme_example_replays_and_reproduces(tmp_path: Path, form: str) -> None:
    (tmp_path / "shop.py").write_text(readme_shop() if form == "decorator" else CONTEXT_SHOP)
    captured = run([sys.executable, "-c", "import shop; shop.main()"], tmp_path)
    assert captured.returncode == 0, captured.stderr
    store = DirectoryStore(tmp_path / "snapshots")
    (original,) = store.list()
    assert original.failure is not None and original.failure.observed

    # both forms replay their recorded entrypoint (no --entrypoint)
    args = [str(SANDBOX), "replay", original.run_id, "--times", "2", "--json"]
    replayed = run(args, tmp_path)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["verdict"]["outcome"] == "reproduced"
    assert [r["outcome"] for r in report["verdict"]["runs"]] == ["reproduced", "reproduced"]
    # no second capture was started inside the replay: the store holds the original and
    # its two replays only
    runs = store.list()
    assert len(runs) == 3
    assert sorted(m.replay_of or "" for m in runs) == ["", original.run_id, original.run_id]
    assert all(m.status == "complete" for m in runs)
