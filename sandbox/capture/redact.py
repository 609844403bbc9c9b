"""Secrets out, before anything is written.

A :class:`Redactor` replaces every secret with a stable placeholder ``<redacted:HASH>`` (the
first 12 hex digits of the secret's SHA-256): the same secret gives the same placeholder
everywhere (events, manifest, blobs), so a trace still shows *that* two calls used the same
key without showing the key.

What counts as a secret:

* text matching the built-in patterns (OpenAI/Anthropic-style ``sk-...`` keys, ``Bearer``
  tokens, AWS access key ids, GitHub and Slack tokens) or the user's own regular expressions;
* the values of sensitive headers (``authorization``, ``x-api-key``, ``cookie`` ...);
* the values of environment variables whose name contains ``KEY``, ``TOKEN``, ``SECRET``,
  ``PASSWORD`` (or is in the user's list): they are redacted in the manifest's ``env`` and,
  wherever they appear later, in every event and text blob;
* literal values the user declares secret.

Redaction works on serialized bytes (one regular-expression pass per event line) so its cost
stays flat. Binary blobs (service dumps) are not rewritten: replacing bytes would corrupt them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TRIGGERS: tuple[str, ...] = (
    "sk-",
    "Bearer ",
    "bearer ",
    "AKIA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "xox",
)
"""Substrings one of which every default pattern's match contains: text with none of them
(and none of the literal secrets) skips the regular expression."""
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"sk-ant-[A-Za-z0-9_\-]{8,}",
    r"sk-(?:proj-|svcacct-|live-|test-)?[A-Za-z0-9_\-]{16,}",
    r"(?<=Bearer )[A-Za-z0-9._~+/\-]{8,}=*",
    r"(?<=bearer )[A-Za-z0-9._~+/\-]{8,}=*",
    r"AKIA[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",
)
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
    }
)
SENSITIVE_ENV_PARTS: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD")
MIN_LITERAL = 6
"""Shorter env values are not treated as literal secrets everywhere (``PASSWORD=1`` would
turn every ``1`` into a placeholder); they are still redacted in the manifest's env."""


def placeholder(secret: str) -> str:
    return f"<redacted:{hashlib.sha256(secret.encode()).hexdigest()[:12]}>"


@dataclass(frozen=True)
class RedactionConfig:
    """What to redact, as data (it crosses into a captured child process as JSON)."""

    patterns: tuple[str, ...] = ()
    """Extra regular expressions; each match is a secret."""
    env_names: tuple[str, ...] = ()
    """Extra environment variable names whose values are secret."""
    secrets: tuple[str, ...] = ()
    """Literal secret values."""
    default_patterns: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "patterns": list(self.patterns),
            "env_names": list(self.env_names),
            "secrets": list(self.secrets),
            "default_patterns": self.default_patterns,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RedactionConfig:
        return cls(
            patterns=tuple(data.get("patterns", ())),
            env_names=tuple(data.get("env_names", ())),
            secrets=tuple(data.get("secrets", ())),
            default_patterns=bool(data.get("default_patterns", True)),
        )


@dataclass
class Redactor:
    config: RedactionConfig = field(default_factory=RedactionConfig)
    env: Mapping[str, str] = field(default_factory=dict)
    """The environment the run starts with: sensitive variables' values become secrets."""

    def __post_init__(self) -> None:
        self._literals: set[str] = set(s for s in self.config.secrets if s)
        for name, value in self.env.items():
            if self.is_sensitive_env(name) and len(value) >= MIN_LITERAL:
                self._literals.add(value)
        self._patterns = list(self.config.patterns)
        if self.config.default_patterns:
            self._patterns[:0] = DEFAULT_PATTERNS
        self._compile()

    # --- configuration -------------------------------------------------------------------

    def is_sensitive_env(self, name: str) -> bool:
        upper = name.upper()
        return upper in {n.upper() for n in self.config.env_names} or any(
            part in upper for part in SENSITIVE_ENV_PARTS
        )

    def add_secret(self, value: str) -> None:
        """Treat ``value`` as secret from now on (for example a header value)."""
        if value and value not in self._literals and len(value) >= MIN_LITERAL:
            self._literals.add(value)
            self._compile()

    def _compile(self) -> None:
        alternatives: list[str] = []
        # Literal secrets, raw and as they appear inside a JSON string, longest first.
        forms: set[str] = set()
        for lit in self._literals:
            forms.add(lit)
            forms.add(json.dumps(lit, ensure_ascii=False)[1:-1])
        alternatives.extend(re.escape(f) for f in sorted(forms, key=len, reverse=True))
        alternatives.extend(f"(?:{p})" for p in self._patterns)
        self._escaped: dict[str, str] = {
            json.dumps(lit, ensure_ascii=False)[1:-1]: lit for lit in self._literals
        }
        # A cheap pre-check: substrings (found with ``in``) one of which every match contains.
        # User patterns cannot be pre-checked: with any, the regular expression always runs.
        triggers = set(forms) | (set(DEFAULT_TRIGGERS) if self.config.default_patterns else set())
        self._triggers: tuple[bytes, ...] | None = (
            None if self.config.patterns else tuple(t.encode() for t in sorted(triggers))
        )
        if alternatives:
            text = "|".join(alternatives)
            self._re: re.Pattern[str] | None = re.compile(text)
            self._bre: re.Pattern[bytes] | None = re.compile(text.encode())
        else:
            self._re = self._bre = None

    # --- applying it ---------------------------------------------------------------------

    def _sub(self, match: re.Match[str]) -> str:
        found = match.group(0)
        return placeholder(self._escaped.get(found, found))

    def _bsub(self, match: re.Match[bytes]) -> bytes:
        return self._sub_text(match.group(0).decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )

    def _sub_text(self, found: str) -> str:
        return placeholder(self._escaped.get(found, found))

    def text(self, value: str) -> str:
        if self._re is None:
            return value
        return self._re.sub(self._sub, value)

    def bytes(self, data: bytes) -> bytes:
        """Redact serialized text (an event line, a JSON or text blob)."""
        if self._bre is None:
            return data
        if self._triggers is not None and not any(t in data for t in self._triggers):
            return data
        if self._bre.search(data) is None:
            return data
        return self._bre.sub(self._bsub, data)

    def headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Headers as a dict with lower-case names; sensitive values become placeholders."""
        out: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            if key in SENSITIVE_HEADERS:
                scheme, sep, rest = value.partition(" ")
                if key.endswith("authorization") and sep and rest:
                    out[key] = f"{scheme} {placeholder(rest)}"
                else:
                    out[key] = placeholder(value)
            else:
                out[key] = self.text(value)
        return out

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment for the manifest: sensitive variables' values become placeholders."""
        return {
            name: placeholder(value) if self.is_sensitive_env(name) else self.text(value)
            for name, value in sorted(env.items())
        }

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value (keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value
