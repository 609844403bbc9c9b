"""Close the one way out that ``internal=True`` leaves open: the host itself.

On Linux, a container on an internal bridge network still reaches every address of the host
through the bridge's gateway address (moby/libnetwork#1151, #2261): a database or model proxy
listening on the host would answer a replayed agent. The sandbox therefore adds, per session,
two iptables rules naming its bridge:

* ``INPUT``: new connections from the bridge to the host are rejected (replies to
  connections the host opened into the sandbox still pass, so the host can reach services);
* ``DOCKER-USER``: traffic from the bridge to any other interface is rejected at once,
  instead of being dropped after a timeout.

Each rule carries the comment ``sandbox-replayer:<session>`` so that :func:`gc_rules` removes
the rules of sessions whose network is gone. The shared sandbox network's rules are those of
the session ``shared`` and stay with it (see :mod:`sandbox.containers.networks`). Without
root or iptables the guard is skipped and the environment says so
(``Environment.host_isolated`` is False).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable

COMMENT_PREFIX = "sandbox-replayer:"
_CHAINS = ("INPUT", "DOCKER-USER")


def bridge_name(session: str) -> str:
    """The Linux bridge of a session's network (at most 15 characters)."""
    return f"sbx-{session}"[:15]


def available() -> bool:
    return os.geteuid() == 0 and shutil.which("iptables") is not None


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["iptables", "-w", "5", *args], capture_output=True, text=True, check=False
    )


def _rules(bridge: str, session: str) -> list[tuple[str, list[str]]]:
    comment = ["-m", "comment", "--comment", f"{COMMENT_PREFIX}{session}"]
    reject = ["-j", "REJECT", "--reject-with", "icmp-net-unreachable"]
    return [
        ("INPUT", ["-i", bridge, "-m", "conntrack", "--ctstate", "NEW", *comment, *reject]),
        ("DOCKER-USER", ["-i", bridge, "!", "-o", bridge, *comment, *reject]),
    ]


def block_host(session: str) -> bool:
    """Add the session's rules; False when the guard is not available here."""
    if not available():
        return False
    bridge = bridge_name(session)
    added = False
    for chain, spec in _rules(bridge, session):
        if _iptables("-C", chain, *spec).returncode == 0:
            added = True
            continue
        result = _iptables("-I", chain, "1", *spec)
        if result.returncode == 0:
            added = added or chain == "INPUT"
        elif chain == "INPUT":
            return False
    return added


def unblock_host(session: str) -> None:
    if not available():
        return
    for chain, spec in _rules(bridge_name(session), session):
        while _iptables("-D", chain, *spec).returncode == 0:
            pass


def rule_sessions() -> dict[str, list[list[str]]]:
    """Sessions that have rules, each with the ``-A`` lines of its rules."""
    found: dict[str, list[list[str]]] = {}
    if not available():
        return found
    for chain in _CHAINS:
        listing = _iptables("-S", chain)
        if listing.returncode != 0:
            continue
        for line in listing.stdout.splitlines():
            words = shlex.split(line)
            if "--comment" not in words:
                continue
            comment = words[words.index("--comment") + 1]
            if comment.startswith(COMMENT_PREFIX):
                found.setdefault(comment[len(COMMENT_PREFIX) :], []).append(words)
    return found


def gc_rules(keep: Iterable[str]) -> int:
    """Remove the rules of every session not in ``keep``; return how many were removed."""
    keep = set(keep)
    removed = 0
    for session, rules in rule_sessions().items():
        if session in keep:
            continue
        for words in rules:
            if words and words[0] == "-A" and _iptables("-D", *words[1:]).returncode == 0:
                removed += 1
    return removed
