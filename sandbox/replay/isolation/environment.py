"""The environment a replayed run sees: the variables the run depended on, as recorded, and
its time zone.

Recorded values are restored over the current environment (the run sees what it saw), except
the variables that describe this machine rather than the run (``PATH``, ``HOME``, the virtual
environment, the sandbox's own) and every loader, interpreter and shell hook (``LD_*``,
``DYLD_*``, ``PYTHON*`` but ``PYTHONHASHSEED``, ``BASH_ENV``, ``NODE_OPTIONS``...): a recorded
value of one of those would make this host load or run something the recording chose. An
imported run (someone else's data) restores only names that are plain identifiers, and never
a value that names a path inside the store (a blob is a file the bundle chose). A value
redacted at capture cannot be restored: it must be
set in the environment of the replay, and the replay refuses to start without it
(:class:`~sandbox.errors.MissingEnvironmentError`). The recorded time zone becomes ``TZ``.
The bindings of the restored services are applied after this, and win.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import zoneinfo
from collections.abc import Iterator, Mapping
from pathlib import Path

from sandbox.errors import MissingEnvironmentError, ReplayError
from sandbox.snapshot.manifest import Manifest

MACHINE_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "SHELL",
        "SHLVL",
        "USER",
        "LOGNAME",
        "HOSTNAME",
        "TERM",
        "TMPDIR",
        "DISPLAY",
        "VIRTUAL_ENV",
        "_",
    }
)
"""Variables that describe the machine, not the run: never restored."""
MACHINE_PREFIXES = ("SANDBOX_", "SSH_", "XDG_", "PYTEST_", "COV_")
HOOK_VARIABLES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "NODE_OPTIONS",
        "NODE_PATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "GIT_CONFIG",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
    }
)
"""Variables through which a loader, an interpreter or a shell runs code of the value's
choosing: never restored, whatever recorded them."""
HOOK_PREFIXES = ("LD_", "DYLD_", "PYTHON", "MALLOC_", "GIT_CONFIG_")
KEPT_HOOKS = frozenset({"PYTHONHASHSEED"})
"""Hook-named variables that only set a value the run depends on (the ``str`` hash seed)."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLACEHOLDER = re.compile(r"<[a-z_]+:[0-9a-f]{12}>")
"""What a redacted value (or part of one: a URL's password) is replaced with at capture."""


def is_hook(name: str) -> bool:
    """Whether ``name`` makes a loader, interpreter or shell run code (``LD_AUDIT``)."""
    upper = name.upper()
    if upper in KEPT_HOOKS:
        return False
    return upper in HOOK_VARIABLES or upper.startswith(HOOK_PREFIXES)


def restorable(name: str) -> bool:
    return (
        name not in MACHINE_VARIABLES
        and not name.startswith(MACHINE_PREFIXES)
        and not is_hook(name)
    )


def names_path_inside(value: str, root: Path) -> bool:
    """Whether a part of ``value`` (split at path separators, whitespace, ``=`` and ``,``)
    is a path that resolves inside ``root`` (relative parts from the working directory)."""
    base = root.resolve()
    for part in re.split(r"[\s=,;" + re.escape(os.pathsep) + r"]+", value):
        if not part or ("/" not in part and part not in (".", "..")):
            continue
        with contextlib.suppress(OSError, ValueError):
            if Path(part).expanduser().resolve().is_relative_to(base):
                return True
    return False


def known_zone(name: str | None) -> str | None:
    """``name`` when it is a time zone this machine knows (``America/New_York``, ``UTC``)."""
    if not name:
        return None
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
    return name


def recorded_timezone(manifest: Manifest) -> str | None:
    return known_zone(manifest.clock.timezone) if manifest.clock is not None else None


def restored_environment(
    manifest: Manifest, current: Mapping[str, str], *, store_root: Path | None = None
) -> dict[str, str]:
    """The variables to set for a replay of ``manifest`` in an environment ``current``;
    ``store_root`` is the folder of the store it is replayed from (an imported run's values
    may not name a path in it).

    Raises :class:`MissingEnvironmentError` naming every redacted variable ``current`` lacks."""
    values: dict[str, str] = {}
    missing: list[str] = []
    bound = {s.binding.env for s in manifest.services if s.binding.env}
    imported = manifest.provenance is not None
    for name, value in manifest.env.items():
        if not restorable(name) or name in bound:
            continue  # a service's binding is set to the restored service after this
        if imported and not _IDENTIFIER.fullmatch(name):
            continue
        if imported and store_root is not None and names_path_inside(value, store_root):
            continue
        if PLACEHOLDER.search(value):
            if name not in current:
                missing.append(name)
            continue
        values[name] = value
    if missing:
        raise MissingEnvironmentError(manifest.run_id, sorted(missing))
    zone = recorded_timezone(manifest)
    if zone is not None:
        values["TZ"] = zone
    return values


def supplied_secrets(manifest: Manifest, current: Mapping[str, str]) -> dict[str, str]:
    """Placeholder -> value: for each variable whose whole recorded value was redacted and
    that ``current`` sets (the user supplied the secret it held), the value to put back
    where the recording shows that placeholder in what the replay sends the agent (a
    request's bearer token equal to the variable: see
    :func:`sandbox.capture.asgi.replay_request`)."""
    return {
        value: current[name]
        for name, value in manifest.env.items()
        if restorable(name) and PLACEHOLDER.fullmatch(value) and name in current
    }


def redacted_values(manifest: Manifest, current: Mapping[str, str]) -> dict[str, str]:
    """The values ``current`` sets for the variables redacted at capture, to hand to a
    replay in another process or container (whose own environment does not hold them).

    Raises :class:`MissingEnvironmentError` naming every redacted variable ``current``
    lacks, as :func:`restored_environment` does."""
    restored_environment(manifest, current)  # refuses when one is missing
    bound = {s.binding.env for s in manifest.services if s.binding.env}
    return {
        name: current[name]
        for name, value in manifest.env.items()
        if restorable(name) and name not in bound and PLACEHOLDER.search(value)
    }


@contextlib.contextmanager
def applied(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in this process's environment for the block (``TZ`` takes effect)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    if "TZ" in values:
        time.tzset()
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        if "TZ" in values:
            time.tzset()


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def given_variable(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` as the replay's command line gives it (``--env``): a variable set for
    the replayed run by hand, over the recorded one (a value that was redacted, or never
    recorded); :class:`ReplayError` when it is not of that form."""
    name, sep, value = text.partition("=")
    if not sep or not _NAME.fullmatch(name):
        raise ReplayError(f"--env {text!r}: write NAME=VALUE, e.g. AGENT_MODEL=gpt-4o")
    return name, value
