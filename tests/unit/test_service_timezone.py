"""Each service keeps the time zone it ran in at capture (its meta), never the agent's: a
restore spec takes it from the service's state; a state that recorded none, or a zone this
machine does not know (a hostile bundle), runs in the sandbox's default, UTC."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.containers import RestoreSpec
from sandbox.services.base import TIMEZONE_META
from sandbox.snapshot.manifest import ServiceState


@pytest.mark.parametrize(
    ("meta", "zone"),
    [
        ({TIMEZONE_META: "UTC"}, "UTC"),
        ({TIMEZONE_META: "Asia/Tokyo"}, "Asia/Tokyo"),
        ({}, None),
        ({TIMEZONE_META: "Not/AZone"}, None),
        ({TIMEZONE_META: "../../etc/passwd"}, None),
        ({TIMEZONE_META: 5}, None),
    ],
)
def test_a_restore_spec_takes_the_services_recorded_zone(meta: dict[str, Any], zone: str) -> None:
    state = ServiceState(name="db", kind="postgres", meta=meta)
    assert RestoreSpec.from_state(state).timezone == zone
