"""Ids drawn from ``uuid_utils`` (compiled: LangChain's run and message ids come from its
``compat.uuid7``) are recorded as the run's draws and handed back on replay, also through
references bound before the capture started; a program that never imports ``uuid_utils``
is not made to."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import uuid_utils
import uuid_utils.compat
from uuid_utils import uuid7 as early_uuid7  # bound before any capture patched uuid_utils
from uuid_utils.compat import uuid7 as compat_uuid7  # what langchain_core.utils.uuid binds

from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import FinalResult, RandomDraw
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

DRAWN: list[list[object]] = []


def agent() -> dict[str, object]:
    drawn: list[object] = [
        compat_uuid7(),
        early_uuid7(),
        uuid_utils.uuid4(),
        uuid_utils.compat.uuid4(),
        uuid_utils.uuid7(timestamp=1_700_000_000),
    ]
    DRAWN.append(drawn)
    return {"ids": [str(u) for u in drawn]}


def test_uuid_utils_draws_are_recorded_and_replayed_with_their_types(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    DRAWN.clear()
    with capture.run(
        "ids",
        store=store,
        entrypoint=Entrypoint(kind="callable", target=f"{__name__}:agent"),
        packages=False,
    ) as rec:
        rec.set_result(agent())
        rec.mark_failed("ids drawn", ResultPredicate(path="ids", op="ne", value=None))
    assert uuid_utils.uuid7 is early_uuid7  # undone
    draws = [e for e in store.load_events(rec.run_id) if isinstance(e, RandomDraw)]
    assert [e.name for e in draws if e.name.startswith("uuid_utils.")] == [
        "uuid_utils.uuid7",
        "uuid_utils.uuid7",
        "uuid_utils.uuid4",
        "uuid_utils.uuid4",
        "uuid_utils.uuid7",
    ]

    report = replay(rec.run_id, store=store, times=2)

    assert report.verdict.reproduced == 2, report.describe()
    recorded = next(e for e in store.load_events(rec.run_id) if isinstance(e, FinalResult))
    for replayed in report.replays:
        result = next(e for e in store.load_events(replayed) if isinstance(e, FinalResult))
        assert result.value == recorded.value
    made = [uuid.UUID, uuid_utils.UUID, uuid_utils.UUID, uuid.UUID, uuid_utils.UUID]
    for drawn in DRAWN:  # the capture's, then each replay's
        assert [type(u) for u in drawn] == made


def test_a_program_that_never_imports_uuid_utils_is_not_made_to(tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        import sys, uuid
        from sandbox import capture

        with capture.run("plain", store={str(tmp_path)!r}, packages=False):
            uuid.uuid4()
        assert "uuid_utils" not in sys.modules, "imported uuid_utils"
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
