"""Boundary policies: how each boundary is served on replay.

Three policies are registered by name:

- ``recorded``: serve the recorded response (a model call never reaches the provider);
- ``live``: call through (tools against the frozen containers, or a live model);
- ``spy``: call through, and report where the live response drifts from the recording.

A :class:`PolicySet` holds the defaults per boundary kind and an ordered list of rules such as
``live=tool:db.*``: a kind, optionally ``:`` and an :mod:`fnmatch` glob over the boundary's
name (``*`` as the kind means every kind). When several rules match, the later one wins, so
``--live tool --recorded 'tool:payments.*'`` calls every tool live except the payment ones.

``mcp`` is a policy kind with no event kind of its own: ``mcp:NAME`` (a glob over MCP server
names) says whether a recorded MCP server is served from the recording (its process not
started, its URL not reached) or ``live``; its requests are recorded as ``tool`` events named
``mcp:NAME/TOOL`` (see :mod:`sandbox.capture.mcp`).

Defaults: ``llm``, ``http`` and ``mcp`` recorded; ``tool``, ``retrieval`` and ``memory`` live
against the restored services; ``clock``, ``random``, ``retry`` and ``timeout`` recorded (the same
times, draws, and failures at the same attempts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType

from sandbox.errors import PolicyError, UnknownNameError
from sandbox.replay.judging.semantics import BOUNDARY_KINDS

POLICY_KINDS: tuple[str, ...] = (*BOUNDARY_KINDS, "mcp")
"""What a rule can name: every boundary kind, and ``mcp`` (MCP servers by name)."""


@dataclass(frozen=True)
class Policy:
    """How one boundary is served. The replay handler reads these flags, not the name."""

    name: str
    serves_recording: bool
    """The response handed to the agent is the recorded one."""
    calls_live: bool
    """The real call is made."""
    reports_drift: bool = False
    """The live response is compared with the recording and drift is reported."""
    description: str = ""


_POLICIES: dict[str, Policy] = {}


def register_policy(policy: Policy) -> Policy:
    """Add a policy to the registry (replacing one of the same name)."""
    _POLICIES[policy.name] = policy
    return policy


RECORDED = register_policy(
    Policy("recorded", serves_recording=True, calls_live=False, description="recorded response")
)
LIVE = register_policy(
    Policy("live", serves_recording=False, calls_live=True, description="call through")
)
SPY = register_policy(
    Policy(
        "spy",
        serves_recording=False,
        calls_live=True,
        reports_drift=True,
        description="call through and report drift from the recording",
    )
)


def get_policy(name: str) -> Policy:
    """The policy registered as ``name``; :class:`UnknownNameError` lists the valid ones."""
    try:
        return _POLICIES[name.strip().lower()]
    except KeyError:
        raise UnknownNameError("replay policy", name, list(_POLICIES)) from None


def policy_names() -> list[str]:
    return sorted(_POLICIES)


DEFAULT_POLICIES: Mapping[str, str] = MappingProxyType(
    {
        "llm": "recorded",
        "tool": "live",
        "http": "recorded",
        "retrieval": "live",
        "memory": "live",
        "clock": "recorded",
        "random": "recorded",
        "retry": "recorded",
        "timeout": "recorded",
        "mcp": "recorded",
    }
)


@dataclass(frozen=True)
class PolicyRule:
    """``policy`` applies to boundaries of ``kind`` (or any, for ``*``) whose name matches."""

    policy: Policy
    kind: str
    pattern: str = "*"

    def matches(self, kind: str, name: str) -> bool:
        return (self.kind == "*" or self.kind == kind) and fnmatchcase(name, self.pattern)

    def __str__(self) -> str:
        target = self.kind if self.pattern == "*" else f"{self.kind}:{self.pattern}"
        return f"{self.policy.name}={target}"


def parse_target(spec: str) -> tuple[str, str]:
    """``'tool:db.*'`` → ``('tool', 'db.*')``; ``'llm'`` → ``('llm', '*')``.

    Only the first ``:`` separates, so a glob may hold colons (``http:https://api.*``).
    """
    text = spec.strip()
    kind, sep, pattern = text.partition(":")
    kind = kind.strip().lower()
    pattern = pattern.strip()
    if not kind:
        raise PolicyError(f"empty boundary kind in {spec!r}: write KIND or KIND:NAME-GLOB")
    if sep and not pattern:
        raise PolicyError(f"empty name glob after ':' in {spec!r}: write {kind} or {kind}:GLOB")
    if kind != "*" and kind not in POLICY_KINDS:
        raise UnknownNameError("boundary kind", kind, [*POLICY_KINDS, "*"])
    return kind, pattern or "*"


def parse_rule(text: str) -> PolicyRule:
    """``'live=tool:db.*'`` → a rule (the form of a repeated ``--policy`` option)."""
    name, sep, spec = text.partition("=")
    if not sep:
        raise PolicyError(
            f"policy rule {text!r} has no '=': write POLICY=KIND[:NAME-GLOB], "
            f"e.g. live=tool:db.* (policies: {', '.join(policy_names())})"
        )
    kind, pattern = parse_target(spec)
    return PolicyRule(get_policy(name), kind, pattern)


@dataclass(frozen=True)
class PolicySet:
    """Per-kind defaults and ordered rules; :meth:`policy_for` picks the last matching rule."""

    rules: tuple[PolicyRule, ...] = ()
    defaults: Mapping[str, str] = field(default_factory=lambda: DEFAULT_POLICIES)

    def __post_init__(self) -> None:
        for kind, name in self.defaults.items():
            if kind not in POLICY_KINDS:
                raise UnknownNameError("boundary kind", kind, list(POLICY_KINDS))
            get_policy(name)

    def policy_for(self, kind: str, name: str = "") -> Policy:
        for rule in reversed(self.rules):
            if rule.matches(kind, name):
                return rule.policy
        if kind not in self.defaults:
            raise UnknownNameError("boundary kind", kind, list(self.defaults))
        return get_policy(self.defaults[kind])

    def with_rule(self, policy: str, spec: str) -> PolicySet:
        """A copy with one more rule (it wins over the earlier ones)."""
        kind, pattern = parse_target(spec)
        rule = PolicyRule(get_policy(policy), kind, pattern)
        return PolicySet((*self.rules, rule), self.defaults)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> PolicySet:
        """Rules from ordered ``(policy, 'kind[:glob]')`` pairs."""
        result = cls()
        for policy, spec in pairs:
            result = result.with_rule(policy, spec)
        return result

    @classmethod
    def from_rules(cls, texts: Iterable[str]) -> PolicySet:
        """Rules from ordered ``'policy=kind[:glob]'`` strings."""
        return cls(tuple(parse_rule(t) for t in texts))

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> PolicySet:
        """Rules from command-line tokens in their order: ``--live 'tool:db.*' --recorded llm``.

        Accepts ``--POLICY SPEC``, ``--POLICY=SPEC`` and ``--policy POLICY=SPEC``.
        """
        pairs: list[tuple[str, str]] = []
        tokens = list(argv)
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if not token.startswith("--") or len(token) == 2:
                raise PolicyError(
                    f"unexpected {token!r}: write --POLICY KIND[:NAME-GLOB] "
                    f"(policies: {', '.join(policy_names())})"
                )
            option, eq, value = token[2:].partition("=")
            if not eq:
                if i + 1 >= len(tokens):
                    raise PolicyError(f"--{option} needs a value, e.g. --{option} 'tool:db.*'")
                value = tokens[i + 1]
                i += 1
            i += 1
            if option == "policy":
                rule = parse_rule(value)
                pairs.append((rule.policy.name, f"{rule.kind}:{rule.pattern}"))
            else:
                pairs.append((option, value))
        return cls.from_pairs(pairs)

    def describe(self) -> str:
        """``llm=recorded, tool=live, ...; rules: live=tool:db.*`` for reports."""
        base = ", ".join(f"{k}={v}" for k, v in self.defaults.items())
        if not self.rules:
            return base
        return f"{base}; rules (last wins): {', '.join(str(r) for r in self.rules)}"
