"""An exception that is not a :class:`~sandbox.errors.SandboxError` escaping a command is a
bug: its traceback goes to a file, and the command says so in one line and exits 3 (never 1,
which means "the failure reproduced")."""

from __future__ import annotations

import os
import tempfile
import traceback

INTERNAL_ERROR = 3


def crash_line(exc: BaseException, prog: str = "sandbox") -> str:
    """Write the traceback of ``exc`` to a new file; return the line to print."""
    what = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    text = "".join(traceback.format_exception(exc))
    try:
        fd, path = tempfile.mkstemp(prefix=f"{prog}-crash-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as write_error:
        return (
            f"{prog}: internal error (a bug): {what}; the traceback could not be saved "
            f"({write_error.strerror or write_error})"
        )
    return f"{prog}: internal error (a bug): {what}; traceback in {path}"
