"""``sandbox k8s-job RUN``: Kubernetes objects for a replay, checked against the API schemas
by ``kubernetes-validate`` (strict: no unknown field). No cluster runs here."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from snapshot_factory import build_snapshot

from cli.main import main
from sandbox.snapshot.manifest import Binding, Clock, ServiceState
from sandbox.snapshot.spool import SpooledStore

VERSIONS = ["1.29.0", "1.33.0"]
"""Native sidecars (restartPolicy on an init container) are on by default from 1.29."""


@pytest.fixture
def k8s_run(s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A run with a Postgres, a Redis and a SQLite service, published to the test S3 server."""
    monkeypatch.setenv("SANDBOX_SPOOL", str(tmp_path / "spool"))
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    snapshot = build_snapshot(store, "Orders_2024.03-01", save=False)
    dump = store.put_blob(b"-- dump\n", "application/sql")
    services = [
        ServiceState(
            name="db",
            kind="postgres",
            before=dump,
            binding=Binding(env="DATABASE_URL", value="postgresql://app@db/shop"),
            meta={"timezone": "Europe/Paris"},  # the server's own zone, recorded at capture
        ),
        ServiceState(name="cache", kind="redis", before=dump),
        ServiceState(
            name="local", kind="sqlite", before=dump, binding=Binding(value="/srv/app.db")
        ),
    ]
    clock = Clock(start=snapshot.manifest.created, timezone="Europe/Paris")
    snapshot.manifest = snapshot.manifest.model_copy(update={"services": services, "clock": clock})
    store.save(snapshot)
    store.flush()
    return s3_url


def objects(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:  # type: ignore[type-arg]
    assert main(["k8s-job", *args]) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_strictly(
    k8s_run: str, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    docs = objects(
        capsys,
        "Orders_2024.03-01",
        "--store",
        k8s_run,
        "--store-cidr",
        "10.20.0.0/16",
        "--replays",
        "3",
    )
    assert [d["kind"] for d in docs] == ["ConfigMap", "NetworkPolicy", "Job", "Job", "Job"]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_job_pulls_then_restores_into_sidecars_then_replays(
    k8s_run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, policy, job = objects(
        capsys, "Orders_2024.03-01", "--store", k8s_run, "--store-cidr", "10.20.0.0/16"
    )
    pod = job["spec"]["template"]["spec"]
    init = pod["initContainers"]
    assert [c["name"] for c in init] == ["pull", "svc-db", "svc-cache", "restore"]
    assert init[0]["command"] == [
        "sandbox",
        "pull",
        "Orders_2024.03-01",
        k8s_run,
        "--store",
        "/state",
    ]
    assert init[0]["envFrom"] == [{"secretRef": {"name": "sandbox-replayer-s3"}}]
    sidecars = init[1:3]
    assert all(c["restartPolicy"] == "Always" for c in sidecars)
    assert "restartPolicy" not in init[0] and "restartPolicy" not in init[3]
    assert sidecars[0]["image"] == "sandbox-replayer/postgres:15"
    assert {"name": "FAKETIME", "value": "@2024-03-01 13:00:00"} in sidecars[0]["env"]
    assert {"name": "TZ", "value": "Europe/Paris"} in sidecars[0]["env"]
    assert {"name": "TZ", "value": "UTC"} in sidecars[1]["env"]  # Redis recorded no zone
    assert sidecars[0]["securityContext"]["runAsUser"] == 999
    (main_container,) = pod["containers"]
    assert main_container["image"] == "sandbox-replayer/runner:latest"
    assert main_container["command"][:3] == ["sandbox", "replay", "Orders_2024.03-01"]
    assert "--services-json" in main_container["command"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert yaml.safe_load(config["data"]["services.json"]) == {
        "db": "postgresql://postgres@127.0.0.1:5432/shop",
        "cache": "redis://127.0.0.1:6379/0",
        "local": "/work/local",
    }
    # Egress: the object store's range and DNS only; no ingress.
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"sandbox-replayer/run": "orders-2024-03-01"}}
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    assert [rule["to"] for rule in spec["egress"]] == [
        [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
        [{"namespaceSelector": {}}],
    ]
    assert job["metadata"]["labels"]["sandbox-replayer/run"] == "orders-2024-03-01"


def test_a_folder_store_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["k8s-job", "run-1", "--store", str(tmp_path), "--store-cidr", "10.0.0.0/8"])
    assert code == 2
    assert "give --store s3://" in capsys.readouterr().err


def test_a_broken_object_fails_validation() -> None:
    """The validator is not a rubber stamp: an unknown field or a wrong type is refused."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {}}
    bad = {**job, "spec": {"template": {"spec": {"containers": [{"name": "a", "imag": "b"}]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)
