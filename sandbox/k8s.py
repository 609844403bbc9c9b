"""A replay as Kubernetes objects: ``sandbox k8s-job RUN`` (on paper, checked by
``kubernetes-validate``; no cluster runs here).

For a run in an object store it makes a ConfigMap (the services' endpoints inside the pod), a
NetworkPolicy and one Job per replay. Each Job's pod:

* pulls the run from the object store into an ``emptyDir`` (init container ``pull``: the
  runner image running ``sandbox pull``, credentials from a Secret as boto3's variables);
* runs each container service (Postgres, Redis) as a native sidecar (an init container with
  ``restartPolicy: Always``), its clock frozen at the captured time by libfaketime, read-only
  root filesystem, every capability dropped, its storage an in-memory ``emptyDir``;
* restores the captured state into them (init container ``restore``: ``sandbox
  restore-state``), then replays the agent in the runner (the main container:
  ``sandbox replay --services-json``), never root.

The NetworkPolicy selects the run's pods and denies all egress except DNS and the object
store's address range (``store_cidr``, which ``pull`` needs: a NetworkPolicy applies to the
whole pod, not to one container); the replay inside the runner refuses any other address
itself (:mod:`sandbox.replay.isolation.netguard`). Ingress is denied too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sandbox.containers.bringup import RestoreSpec, faketime_env
from sandbox.containers.runner import RUNNER_GID, RUNNER_UID
from sandbox.containers.specs import container_spec, is_path_kind, spec_image_tag
from sandbox.snapshot.manifest import Manifest

STATE = "/state"
CONFIG = "/config"
WORK = "/work"
LABEL = "sandbox-replayer/run"
Object = dict[str, Any]


@dataclass(frozen=True)
class JobSettings:
    store_url: str
    """The object store the run is pulled from (``s3://BUCKET/PREFIX``)."""
    store_cidr: str
    """The object store's address range: the one egress allowed (for ``pull``)."""
    store_port: int = 443
    registry: str = ""
    """Prefix of the image names (``registry.example/team/``); empty: as built locally."""
    credentials_secret: str = "sandbox-replayer-s3"
    """Secret whose keys are boto3's variables (``AWS_ACCESS_KEY_ID``, ...)."""
    namespace: str | None = None
    replays: int = 1
    deadline: int = 1800


def dns_name(text: str, limit: int = 52) -> str:
    """A DNS-1123 label from a run id (lowercase, ``-``, cut to leave room for suffixes)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return name or "run"


def _meta(name: str, run: str, settings: JobSettings) -> Object:
    meta: Object = {"name": name, "labels": {LABEL: run, "app.kubernetes.io/name": "sandbox"}}
    if settings.namespace:
        meta["namespace"] = settings.namespace
    return meta


def _locked_down() -> Object:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _env(values: Mapping[str, str]) -> list[Object]:
    return [{"name": k, "value": v} for k, v in sorted(values.items())]


def _sidecar(spec: RestoreSpec, frozen_at: datetime | None, timezone: str, image: str) -> Object:
    cspec = container_spec(spec.kind)
    env = dict(cspec.env)
    if frozen_at is not None and cspec.faketime:
        env.update(faketime_env(frozen_at, timezone))
    mounts = {cspec.storage.path: "data"} if cspec.storage.path else {}
    mounts.update({path: f"tmp-{n}" for n, path in enumerate(sorted(cspec.tmpfs))})
    container: Object = {
        "name": f"svc-{dns_name(spec.name, 40)}",
        "image": image + spec_image_tag(cspec),
        "restartPolicy": "Always",
        "args": list(cspec.command),
        "env": _env(env),
        "ports": [{"containerPort": cspec.port}],
        "startupProbe": {
            "tcpSocket": {"port": cspec.port},
            "periodSeconds": 1,
            "failureThreshold": 120,
        },
        "resources": {"limits": {"cpu": str(cspec.cpus), "memory": "1Gi"}},
        "securityContext": _locked_down(),
        "volumeMounts": [{"name": f"{spec.name}-{v}", "mountPath": p} for p, v in mounts.items()],
    }
    if cspec.storage.path:  # the server's own user owns its data folder
        uid, gid = cspec.storage.owner
        container["securityContext"].update(runAsUser=uid, runAsGroup=gid)
    return container


def _sidecar_volumes(spec: RestoreSpec) -> list[Object]:
    cspec = container_spec(spec.kind)
    names = (["data"] if cspec.storage.path else []) + [f"tmp-{n}" for n in range(len(cspec.tmpfs))]
    return [{"name": f"{spec.name}-{n}", "emptyDir": {"medium": "Memory"}} for n in names]


def endpoints(manifest: Manifest) -> dict[str, str]:
    """Each service's address inside the pod: sidecars on localhost, file kinds under
    ``/work``."""
    found = {}
    for state in manifest.services:
        spec = RestoreSpec.from_state(state)
        if is_path_kind(spec.kind):
            found[spec.name] = f"{WORK}/{spec.name}"
        else:
            cspec = container_spec(spec.kind)
            database = spec.database or cspec.default_database
            found[spec.name] = cspec.url("127.0.0.1", cspec.port, database)
    return found


def replay_objects(manifest: Manifest, settings: JobSettings) -> list[Object]:
    """The ConfigMap, the NetworkPolicy and one Job per replay for this run."""
    run = dns_name(manifest.run_id)
    config = f"replay-{run}"
    objects: list[Object] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(config, run, settings),
            "data": {"services.json": json.dumps(endpoints(manifest), indent=2, sort_keys=True)},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(f"replay-{run}-no-egress", run, settings),
            "spec": {
                "podSelector": {"matchLabels": {LABEL: run}},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [],
                "egress": [
                    {
                        "to": [{"ipBlock": {"cidr": settings.store_cidr}}],
                        "ports": [{"protocol": "TCP", "port": settings.store_port}],
                    },
                    {
                        "to": [{"namespaceSelector": {}}],
                        "ports": [
                            {"protocol": "UDP", "port": 53},
                            {"protocol": "TCP", "port": 53},
                        ],
                    },
                ],
            },
        },
    ]
    objects += [_job(manifest, settings, run, config, n) for n in range(1, settings.replays + 1)]
    return objects


def _job(manifest: Manifest, settings: JobSettings, run: str, config: str, n: int) -> Object:
    specs = [RestoreSpec.from_state(s) for s in manifest.services]
    clock = manifest.clock
    frozen_at = clock.start if clock is not None else None
    runner = settings.registry + "sandbox-replayer/runner:latest"
    credentials = [{"secretRef": {"name": settings.credentials_secret}}]

    def sandbox(name: str, *args: str, creds: bool = False) -> Object:
        container: Object = {
            "name": name,
            "image": runner,
            "command": ["sandbox", *args],
            "securityContext": _locked_down(),
            "volumeMounts": [
                {"name": "state", "mountPath": STATE},
                {"name": "config", "mountPath": CONFIG, "readOnly": True},
                {"name": "work", "mountPath": WORK},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
            "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        }
        if creds:
            container["envFrom"] = credentials
        return container

    services = f"{CONFIG}/services.json"
    pull = sandbox(
        "pull", "pull", manifest.run_id, settings.store_url, "--store", STATE, creds=True
    )
    pull["env"] = _env({"SANDBOX_SPOOL": f"{WORK}/spool"})
    sidecars = [
        _sidecar(s, frozen_at, s.timezone or "UTC", settings.registry)
        for s in specs
        if not is_path_kind(s.kind)
    ]
    restore = sandbox(
        "restore", "restore-state", manifest.run_id, "--store", STATE, "--services-json", services
    )
    main = sandbox(
        "replay",
        "replay",
        manifest.run_id,
        "--store",
        STATE,
        "--services-json",
        services,
        "--times",
        "1",
        "--json",
    )
    volumes: list[Object] = [
        {"name": "state", "emptyDir": {}},
        {"name": "work", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {"medium": "Memory"}},
        {"name": "config", "configMap": {"name": config}},
    ]
    for spec in specs:
        if not is_path_kind(spec.kind):
            volumes += _sidecar_volumes(spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(f"replay-{run}-{n}", run, settings),
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": settings.deadline,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": {LABEL: run, "app.kubernetes.io/name": "sandbox"}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUNNER_UID,
                        "runAsGroup": RUNNER_GID,
                        "fsGroup": RUNNER_GID,
                    },
                    "initContainers": [pull, *sidecars, restore],
                    "containers": [main],
                    "volumes": volumes,
                },
            },
        },
    }


def render(objects: list[Object]) -> str:
    """The objects as one multi-document YAML stream."""
    import yaml

    return yaml.safe_dump_all(objects, sort_keys=False)
