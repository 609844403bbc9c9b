"""Redirected on replay: every connection the replayed agent opens through a common client
(:mod:`sandbox.capture.clients`) to an endpoint the run recorded goes to that service's
sandbox counterpart (its container, or its restored file) instead, whatever the agent's own
configuration says. A connection to the sandbox itself passes. Any other endpoint (one the
run recorded without capturing its state, or one it never used) is refused with one line
naming it and the policy that would let it through live, reported like a refused socket
(:mod:`sandbox.replay.isolation.netguard`): the run is inconclusive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sandbox.capture.clients import Connect, address_of, endpoint_key
from sandbox.capture.clients import install as install_clients
from sandbox.errors import NetworkRefusedError
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.manifest import Manifest


class Redirect:
    """The replay's client router; see the module documentation."""

    def __init__(
        self,
        original: Manifest,
        sandbox: Mapping[str, str],
        *,
        policies: PolicySet | None = None,
        refuse: Callable[[NetworkRefusedError], None] | None = None,
    ) -> None:
        self.policies = policies or PolicySet()
        self.refuse = refuse
        kinds = {s.name: s.kind for s in original.services}
        self._sandbox = {
            endpoint_key(kinds[name], url) for name, url in sandbox.items() if name in kinds
        }
        """Keys of the sandbox's own endpoints: connections to them pass."""
        self._targets: dict[str, str] = {}
        """Key of a recorded endpoint -> the sandbox endpoint standing for it."""
        self._uncaptured: set[str] = set()
        for state in original.services:  # declared services (and older snapshots)
            if state.binding.value and state.name in sandbox:
                key = endpoint_key(state.kind, state.binding.value)
                self._targets[key] = sandbox[state.name]
        for touched in original.touched:
            key = endpoint_key(touched.kind, touched.endpoint)
            if touched.service is not None and touched.service in sandbox:
                self._targets[key] = sandbox[touched.service]
            else:
                self._uncaptured.add(key)

    def install(self) -> Callable[[], None]:
        return install_clients(self)

    def __call__(self, connect: Connect) -> str:
        key = endpoint_key(connect.kind, connect.endpoint)
        if key in self._sandbox:
            return connect.endpoint
        target = self._targets.get(key)
        if target is not None:
            return target
        address = address_of(connect.kind, connect.endpoint)
        if self.policies.policy_for("http", address).calls_live:
            return connect.endpoint
        why = (
            "the run recorded it without capturing its state (--services none)"
            if key in self._uncaptured
            else "the run never used it"
        )
        error = NetworkRefusedError(
            f"replay refused a {connect.kind} connection ({connect.client}) to {address}: it "
            f"has no sandbox counterpart ({why}); to reach it live, replay with "
            f"--live 'http:{address}'",
            host=address,
            port=None,
        )
        if self.refuse is not None:
            self.refuse(error)
        raise error
