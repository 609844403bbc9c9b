"""Entry point of the ``sandbox`` command: every project error becomes one line and exit 2;
any other exception is a bug: one line naming the file that holds its traceback, exit 3."""

from __future__ import annotations

import sys

import typer

from cli import commands, jsonout  # noqa: F401  (commands registers the commands on the app)
from cli.app import app
from cli.capture_cmd import PASSES_THROUGH, TOOL_FAILURE
from cli.crash import INTERNAL_ERROR, crash_line
from sandbox.errors import SandboxError

MAX_ERROR_LINE = 300
"""An error is one line of at most this many characters, whatever the input held."""


def error_line(exc: SandboxError) -> str:
    text = "sandbox: error: " + " ".join(str(exc).split())
    return text if len(text) <= MAX_ERROR_LINE else text[: MAX_ERROR_LINE - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok or failure gone, 1 failure reproduced,
    2 could not judge or bad input, 3 internal error). A command that runs a program
    (:data:`PASSES_THROUGH`) exits with the program's code instead, and 125 when it failed
    itself (as ``docker run`` does)."""
    jsonout.reset()
    code, line = _run(argv)
    if line is not None and _command(argv) in PASSES_THROUGH:
        code = TOOL_FAILURE  # its own failure, told apart from the program's exit codes
    if line is not None and jsonout.wanted():
        jsonout.emit_error(line, code)
    return code


def _command(argv: list[str] | None) -> str | None:
    """The command ``argv`` names (the app has no options of its own before it)."""
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if not a.startswith("-")), None)


def _run(argv: list[str] | None) -> tuple[int, str | None]:
    """The exit code, and the error line when the command failed (already on stderr)."""
    try:
        result = app(args=argv, prog_name="sandbox", standalone_mode=False)
    except SandboxError as exc:
        line = error_line(exc)
        print(line, file=sys.stderr)
        return 2, line
    except typer.Exit as exc:
        return int(exc.exit_code), None
    except (typer.Abort, KeyboardInterrupt):
        print("sandbox: aborted", file=sys.stderr)
        return 130, None
    except typer.TyperException as exc:
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            print(f"sandbox: error: {exc.format_message()}", file=sys.stderr)
        return int(exc.exit_code), f"sandbox: error: {exc.format_message()}"
    except Exception as exc:  # a bug: never an exit code that means a verdict
        line = crash_line(exc)
        print(line, file=sys.stderr)
        return INTERNAL_ERROR, line
    return (result if isinstance(result, int) else 0), None


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
