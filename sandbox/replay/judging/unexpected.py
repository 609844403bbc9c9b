"""Why a replayed run ended with an exception that is not the recorded failure.

Such a run cannot be judged: the code never got as far as the failure, so "the failure is
gone" would be a guess. :func:`explain` sorts the exception into the reason class the
verdict reports, with a hint a person can act on::

    explain(ErrorInfo(type="KeyError", message="'PRICING_URL'"), environ={})
    # Unexpected(reason='exception', hint='a missing environment variable (PRICING_URL is not set)')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from sandbox.snapshot.events import ErrorInfo

Reason = Literal[
    "mismatch",
    "refused",
    "exception",
    "exit",
    "sandbox",
    "timeout",
    "order",
    "uncaptured",
    "unexercised",
    "outside",
]
"""Why a run is inconclusive: a request the recording cannot answer, a connection outside the
sandbox that was refused, a different exception, a non-zero exit with no predicate holding,
an error of the sandbox itself, a timeout, the recorded order of concurrent calls that
could not be kept, state the run reached that a partial capture did not hold, a run that
made none of the recorded calls, or a program that did not reach the run's block or did
other work before it (:mod:`sandbox.replay.window`)."""
REASONS: tuple[Reason, ...] = get_args(Reason)

REASON_TEXT: dict[str, str] = {
    "mismatch": "recording mismatch",
    "refused": "a connection outside the sandbox refused",
    "exception": "a different exception",
    "exit": "a different exit code",
    "sandbox": "sandbox error",
    "timeout": "timeout",
    "order": "recorded order of concurrent calls not kept",
    "uncaptured": "reached state that was not captured",
    "unexercised": "the replay exercised nothing of the recorded run",
    "outside": "the program did other work before the run, or never reached it",
}

_TIMEOUTS = frozenset(
    {
        "TimeoutError",
        "TimeoutException",
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "APITimeoutError",
        "Timeout",
        "QueryCanceled",
    }
)
_REFUSED = frozenset(
    {
        "ConnectError",
        "ConnectionRefusedError",
        "ConnectionError",
        "ConnectionResetError",
        "APIConnectionError",
        "NewConnectionError",
        "ClientConnectorError",
    }
)
_REFUSED_TEXT = re.compile(r"connection refused|errno 111|could not connect", re.I)
_ENV_NAME = re.compile(r"^'([A-Z][A-Z0-9_]*)'$")
_IMPORT = frozenset({"ModuleNotFoundError", "ImportError"})
_FILES = frozenset({"FileNotFoundError", "NotADirectoryError", "PermissionError"})


@dataclass(frozen=True)
class Unexpected:
    reason: Reason
    hint: str | None = None

    def describe(self, error: ErrorInfo) -> str:
        """``KeyError: 'X' (a missing environment variable ...)``."""
        message = error.message.strip().splitlines()[0][:200] if error.message.strip() else ""
        text = f"{error.type}: {message}" if message else error.type
        return f"{text} ({self.hint})" if self.hint else text


def _bare(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def explain(error: ErrorInfo, environ: Mapping[str, str]) -> Unexpected:
    """The reason class and hint for ``error``, raised by a replayed run where the recorded
    failure was expected; ``environ`` is the environment the run saw."""
    name = _bare(error.type)
    if error.type.startswith("sandbox.errors."):
        return Unexpected("sandbox", "the sandbox could not serve the run")
    if name in _TIMEOUTS:
        return Unexpected("timeout", "a call timed out")
    if name in _REFUSED or _REFUSED_TEXT.search(error.message):
        return Unexpected("exception", "a live dependency refused the connection")
    if name == "KeyError":
        found = _ENV_NAME.match(error.message.strip())
        if found and found.group(1) not in environ:
            return Unexpected(
                "exception", f"a missing environment variable ({found.group(1)} is not set)"
            )
    if name in _IMPORT:
        return Unexpected("exception", "code that does not import where the replay runs")
    if name in _FILES:
        return Unexpected("exception", "a file or folder missing where the replay runs")
    return Unexpected("exception")
