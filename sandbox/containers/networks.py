"""The network a sandbox's service containers run on: the shared sandbox network, or one of
the sandbox's own.

Both are docker ``internal`` bridge networks (no route out of the host), and the host's
firewall rules for their bridge (:mod:`sandbox.containers.firewall`) refuse new connections
from them to this host. On the **shared** network (``sbx-shared``) traffic between
containers is off as well (``enable_icc=false``, enforced by the kernel's bridge netfilter):
a container there reaches no other container, of its own sandbox or another's, and answers
only the connections this host opens into it.

The shared network is made once per engine and kept, like docker's own bridge, so a
bring-up on it creates and removes no network and adds no firewall rule (about 0.2 s less
per bring-up); its rules are checked at each bring-up and put back when missing. It is used
only where that guard can be checked (root, iptables, and bridged traffic going through
iptables); elsewhere, and for a sandbox whose containers must talk to each other (the runner
container reaches the services by name), each sandbox gets a network of its own, removed
with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox.containers import firewall
from sandbox.containers.engine import DockerClient
from sandbox.containers.labels import MANAGED, SESSION, SHARED, Owner

SHARED_NAME = "sbx-shared"
SHARED_SESSION = "shared"
"""The firewall rules' and labels' session of the shared network (session ids are hex)."""
BRIDGE_NETFILTER = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
_ICC = "com.docker.network.bridge.enable_icc"
_BRIDGE = "com.docker.network.bridge.name"


def private(client: DockerClient, owner: Owner) -> tuple[str, str]:
    """A new network of the sandbox's own: its name and id (its firewall rules are the
    session's, added by the caller)."""
    name = f"sbx-{owner.session}"
    network = client.networks.create(
        name,
        driver="bridge",
        internal=True,
        labels=owner.labels(),
        options={_BRIDGE: firewall.bridge_name(owner.session)},
    )
    return name, str(network.id)


def shared(client: DockerClient) -> tuple[str, str] | None:
    """The shared sandbox network's name and id, made if missing, with its firewall rules in
    place; None when this host cannot enforce its isolation (no root or iptables, bridged
    traffic not filtered, or a network of that name made by someone else)."""
    if not firewall.available():
        return None
    network = _find(client) or _create(client)
    if network is None or not shared_settings_hold(network.attrs) or not _bridges_filtered():
        return None
    if not firewall.block_host(SHARED_SESSION):
        return None
    return str(network.name), str(network.id)


def _find(client: DockerClient) -> Any:
    for network in client.networks.list(filters={"label": f"{SHARED}=true"}):
        if network.name == SHARED_NAME:
            return network
    return None


def _create(client: DockerClient) -> Any:
    import docker.errors

    try:
        return client.networks.create(
            SHARED_NAME,
            driver="bridge",
            internal=True,
            check_duplicate=True,
            labels={MANAGED: "true", SESSION: SHARED_SESSION, SHARED: "true"},
            options={_ICC: "false", _BRIDGE: firewall.bridge_name(SHARED_SESSION)},
        )
    except docker.errors.APIError:
        # Made meanwhile by another process (a conflict, or its bridge's name taken): that
        # one; a network of that name that is not ours: none (each sandbox gets its own).
        return _find(client)


def shared_settings_hold(attrs: dict[str, Any]) -> bool:
    """Whether a network's settings are the shared network's: internal, no traffic between
    containers, on the bridge its firewall rules name."""
    options = attrs.get("Options") or {}
    return (
        attrs.get("Internal") is True
        and options.get(_ICC) == "false"
        and options.get(_BRIDGE) == firewall.bridge_name(SHARED_SESSION)
    )


def _bridges_filtered() -> bool:
    """Whether bridged traffic goes through iptables, which ``enable_icc=false`` needs."""
    try:
        return BRIDGE_NETFILTER.read_text().strip() == "1"
    except OSError:
        return False
