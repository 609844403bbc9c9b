"""Entry point of the ``sandbox`` command: every project error becomes one line and exit 2;
any other exception is a bug: one line naming the file that holds its traceback, exit 3."""

from __future__ import annotations

import sys

import typer

from cli import commands  # noqa: F401  (registers the commands on the app)
from cli.app import app
from cli.crash import INTERNAL_ERROR, crash_line
from sandbox.errors import SandboxError

MAX_ERROR_LINE = 300
"""An error is one line of at most this many characters, whatever the input held."""


def error_line(exc: SandboxError) -> str:
    text = "sandbox: error: " + " ".join(str(exc).split())
    return text if len(text) <= MAX_ERROR_LINE else text[: MAX_ERROR_LINE - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok or failure gone, 1 failure reproduced,
    2 could not judge or bad input, 3 internal error)."""
    try:
        result = app(args=argv, prog_name="sandbox", standalone_mode=False)
    except SandboxError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("sandbox: aborted", file=sys.stderr)
        return 130
    except typer.TyperException as exc:
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            print(f"sandbox: error: {exc.format_message()}", file=sys.stderr)
        return int(exc.exit_code)
    except Exception as exc:  # a bug: never an exit code that means a verdict
        print(crash_line(exc), file=sys.stderr)
        return INTERNAL_ERROR
    return result if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
