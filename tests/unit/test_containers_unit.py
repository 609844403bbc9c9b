"""The container sandbox's pure parts: no Docker needed."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta, timezone

from sandbox.containers import RestoreSpec, faketime_env
from sandbox.containers.firewall import bridge_name
from sandbox.containers.labels import HOST, MANAGED, PID, Owner, owner_alive
from sandbox.containers.networks import SHARED_SESSION, shared_settings_hold
from sandbox.containers.specs import LIBFAKETIME, major_version
from sandbox.snapshot.events import BlobRef
from sandbox.snapshot.manifest import Binding, ServiceState


def test_faketime_env_is_utc_and_starts_at_the_captured_time() -> None:
    paris = timezone(timedelta(hours=1))
    env = faketime_env(datetime(2024, 3, 1, 13, 0, 0, tzinfo=paris))
    assert env["FAKETIME"] == "@2024-03-01 12:00:00"
    assert env["LD_PRELOAD"] == LIBFAKETIME
    assert env["TZ"] == "UTC"


def test_major_version_reads_every_form() -> None:
    assert major_version("15.18") == 15
    assert major_version("PostgreSQL 16.2 (Debian 16.2-1)") == 16
    assert major_version("7.0.15") == 7
    assert major_version(None) is None and major_version("unknown") is None


def test_service_spec_from_manifest_state() -> None:
    sha = "a" * 64
    state = ServiceState(
        name="db",
        kind="postgres",
        binding=Binding(env="DATABASE_URL", value="postgresql://app@prod:5432/shop"),
        version="15.4",
        before=BlobRef(sha256=sha, size=1),
    )
    spec = RestoreSpec.from_state(state)
    assert (spec.env, spec.blob, spec.database, spec.version) == (
        "DATABASE_URL",
        sha,
        "shop",
        "15.4",
    )
    files = RestoreSpec.from_state(
        ServiceState(name="ws", kind="files", binding=Binding(env="WORKSPACE", value="/srv/ws"))
    )
    assert files.path == "/srv/ws" and files.blob is None


def test_owner_labels_and_liveness() -> None:
    me = Owner.current()
    labels = me.labels()
    assert labels[MANAGED] == "true" and labels[PID] == str(os.getpid())
    assert owner_alive(labels)
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert not owner_alive({**labels, PID: str(dead.pid)})
    assert owner_alive({**labels, PID: "1", HOST: "another-host"})  # cannot tell: kept
    assert owner_alive({MANAGED: "true"})  # names no process: kept (gc --all removes it)


def test_bridge_names_fit_linux_limit() -> None:
    assert len(bridge_name("0123456789ab")) <= 15


def test_a_shared_network_is_used_only_with_its_isolating_settings() -> None:
    options = {
        "com.docker.network.bridge.enable_icc": "false",
        "com.docker.network.bridge.name": bridge_name(SHARED_SESSION),
    }
    assert shared_settings_hold({"Internal": True, "Options": options})
    assert not shared_settings_hold({"Internal": False, "Options": options})
    icc_on = {**options, "com.docker.network.bridge.enable_icc": "true"}
    assert not shared_settings_hold({"Internal": True, "Options": icc_on})
    other_bridge = {**options, "com.docker.network.bridge.name": "br-other"}
    assert not shared_settings_hold({"Internal": True, "Options": other_bridge})
    assert not shared_settings_hold({"Internal": True, "Options": None})


def test_naive_frozen_time_is_taken_as_utc() -> None:
    assert faketime_env(datetime(2024, 3, 1, 12, 0))["FAKETIME"] == "@2024-03-01 12:00:00"
    assert faketime_env(datetime(2024, 3, 1, 12, 0, tzinfo=UTC))["FAKETIME"].endswith("12:00:00")


def test_build_result_is_one_line_with_its_state() -> None:
    from sandbox.containers.images import BuildResult

    tag = "sandbox-replayer/postgres:15"
    assert [
        BuildResult("postgres", tag, "present").describe(),
        BuildResult("postgres", tag, "built", 41.4, "missing").describe(),
        BuildResult("postgres", tag, "rebuilt", 39.6, "context changed").describe(),
        BuildResult("postgres", tag, "rebuilt", 12.0, "forced").describe(),
    ] == [
        f"postgres: {tag} present",
        f"postgres: {tag} built in 41 s",
        f"postgres: {tag} rebuilt in 40 s because its build context changed",
        f"postgres: {tag} rebuilt in 12 s (forced)",
    ]
