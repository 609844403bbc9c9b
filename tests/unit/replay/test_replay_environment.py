"""The environment and local time a replay runs in (no Docker, no child process)."""

from __future__ import annotations

import os
import time
from datetime import UTC, date, datetime

import pytest

from sandbox.errors import MissingEnvironmentError
from sandbox.replay.conditions.clock import FrozenClock
from sandbox.replay.isolation.environment import applied, restored_environment
from sandbox.snapshot.manifest import Clock, Manifest

START = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)  # 07:00 in New York


def manifest(env: dict[str, str], zone: str = "UTC") -> Manifest:
    return Manifest(run_id="run-1", created=START, env=env, clock=Clock(start=START, timezone=zone))


def test_recorded_values_win_machine_variables_stay() -> None:
    recorded = manifest(
        {"DISCOUNT_PCT": "150", "PATH": "/capture/bin", "SANDBOX_STORE": "x", "LANG": "C.UTF-8"},
        "America/New_York",
    )
    values = restored_environment(recorded, {"DISCOUNT_PCT": "10", "PATH": "/usr/bin"})
    assert values == {"DISCOUNT_PCT": "150", "LANG": "C.UTF-8", "TZ": "America/New_York"}


def test_redacted_values_come_from_the_environment_or_stop_the_replay() -> None:
    recorded = manifest(
        {
            "OPENAI_API_KEY": "<redacted:0123456789ab>",
            "DATABASE_URL": "postgresql://app:<redacted:ba9876543210>@db/app",
            "MODE": "fast",
        }
    )
    supplied = {"OPENAI_API_KEY": "sk-x", "DATABASE_URL": "postgresql://app:pw@db/app"}
    assert restored_environment(recorded, supplied) == {"MODE": "fast", "TZ": "UTC"}
    with pytest.raises(MissingEnvironmentError) as caught:
        restored_environment(recorded, {"OPENAI_API_KEY": "sk-x"})
    assert str(caught.value) == (
        "run run-1 needs DATABASE_URL (redacted at capture): set it in the environment "
        "before replaying"
    )


def test_unknown_zone_is_not_applied() -> None:
    assert "TZ" not in restored_environment(manifest({}, "XYZ"), {})


def test_frozen_clock_gives_local_time_in_the_applied_zone() -> None:
    with applied({"TZ": "America/New_York"}):
        clock = FrozenClock(START)
        clock.start()
        try:
            naive = (datetime.now(), datetime.today(), date.today(), time.localtime().tm_hour)
            aware = datetime.now(UTC)
            stamp = time.strftime("%H:%M %Z")
            clock.reach(datetime(2024, 7, 1, 12, 0, tzinfo=UTC).timestamp())
            summer = time.strftime("%H:%M %Z")
        finally:
            clock.stop()
    assert naive == (datetime(2024, 3, 1, 7, 0), datetime(2024, 3, 1, 7, 0), date(2024, 3, 1), 7)
    assert aware == START
    assert (stamp, summer) == ("07:00 EST", "08:00 EDT")
    assert os.environ.get("TZ") != "America/New_York"


def test_a_service_binding_redacted_at_capture_is_not_required() -> None:
    from sandbox.snapshot.manifest import Binding, ServiceState

    recorded = manifest(
        {"DATABASE_URL": "postgresql://app:<redacted:ba9876543210>@db/app", "MODE": "fast"}
    ).model_copy(
        update={
            "services": [
                ServiceState(name="db", kind="postgres", binding=Binding(env="DATABASE_URL"))
            ]
        }
    )
    # The binding is pointed at the restored service afterwards: nothing to supply.
    assert restored_environment(recorded, {}) == {"MODE": "fast", "TZ": "UTC"}


def test_the_redacted_values_the_user_sets_are_handed_to_another_process() -> None:
    """What ``ci-repro --in-container`` passes into the runner: the user's values of the
    variables redacted at capture, and nothing recorded or of this machine."""
    from sandbox.replay.isolation.environment import redacted_values

    recorded = manifest(
        {"API_TOKEN": "<redacted:0123456789ab>", "MODE": "fast", "SANDBOX_X": "<x:0123456789ab>"}
    )
    current = {"API_TOKEN": "tok-1", "MODE": "slow", "HOME": "/root", "SANDBOX_X": "y"}
    assert redacted_values(recorded, current) == {"API_TOKEN": "tok-1"}
    with pytest.raises(MissingEnvironmentError, match="API_TOKEN"):
        redacted_values(recorded, {"MODE": "slow"})
