"""A captured run of the stock agent, its model server stopped once the capture is done."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import otel_agent
import pytest

from examples._model import scripted_model
from sandbox import capture
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

ENTRYPOINT = "otel_agent:main"


@dataclass(frozen=True)
class Captured:
    store: DirectoryStore
    run_id: str
    model_url: str
    """Where the scripted model answered during the capture; nothing listens there now."""


@pytest.fixture
def captured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Captured:
    store = DirectoryStore(tmp_path / "store")
    with scripted_model(otel_agent.script) as client:
        url = str(client.base_url)
        monkeypatch.setenv(otel_agent.MODEL_URL_ENV, url)
        with capture.run(
            "kettle",
            store=store,
            entrypoint=Entrypoint(kind="callable", target=ENTRYPOINT),
            packages=False,
        ) as rec:
            otel_agent.main()
            rec.mark_failed("said in stock with 0 left", otel_agent.FAILURE)
    return Captured(store, rec.run_id, url)
