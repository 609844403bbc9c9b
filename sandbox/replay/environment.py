"""The environment a replayed run sees: the variables the run depended on, as recorded, and
its time zone.

Recorded values are restored over the current environment (the run sees what it saw), except
the variables that describe this machine rather than the run (``PATH``, ``HOME``, the virtual
environment, the sandbox's own). A value redacted at capture cannot be restored: it must be
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

from sandbox.errors import MissingEnvironmentError
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
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "VIRTUAL_ENV",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "_",
    }
)
"""Variables that describe the machine, not the run: never restored."""
MACHINE_PREFIXES = ("SANDBOX_", "SSH_", "XDG_", "PYTEST_", "COV_")
PLACEHOLDER = re.compile(r"<[a-z_]+:[0-9a-f]{12}>")
"""What a redacted value (or part of one: a URL's password) is replaced with at capture."""


def restorable(name: str) -> bool:
    return name not in MACHINE_VARIABLES and not name.startswith(MACHINE_PREFIXES)


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


def restored_environment(manifest: Manifest, current: Mapping[str, str]) -> dict[str, str]:
    """The variables to set for a replay of ``manifest`` in an environment ``current``.

    Raises :class:`MissingEnvironmentError` naming every redacted variable ``current`` lacks."""
    values: dict[str, str] = {}
    missing: list[str] = []
    bound = {s.binding.env for s in manifest.services if s.binding.env}
    for name, value in manifest.env.items():
        if not restorable(name) or name in bound:
            continue  # a service's binding is set to the restored service after this
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
