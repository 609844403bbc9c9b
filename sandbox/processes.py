"""Whether a process runs: by id, and (Linux) whether it is still the same process, by its
start time, so that a reused id is not mistaken for it. Imports nothing of the package."""

from __future__ import annotations

import os


def process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (Linux), or None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether a process with this id runs on this host and, when ``start`` is given, is the
    same process as then (see :func:`process_start`)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    except (OverflowError, OSError):
        return False
    if start is not None:
        now = process_start(pid)
        if now is not None and now != start:
            return False
    return True
