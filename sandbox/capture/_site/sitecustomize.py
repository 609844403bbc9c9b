"""Put on ``PYTHONPATH`` by ``sandbox capture -- CMD`` (and by the replay of such a run, and
for a server the replay starts live): starts capture (or replay, or the replay's frozen
clock) in the child process, then runs the ``sitecustomize`` this one shadows, if there is
one."""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _other_interpreter() -> dict[str, object] | None:
    """The capture's settings when this child runs on another interpreter than the captured
    program (a venv of its own): only the services it opens are reported, by the standard
    library (the sandbox package's dependencies are not installed here)."""
    import json

    try:
        settings = json.loads(os.environ["SANDBOX_CAPTURE"])
    except ValueError:
        return None
    if not isinstance(settings, dict):
        return None
    prefix = settings.get("prefix")
    if not prefix or os.path.realpath(sys.prefix) == prefix:
        return None
    return {str(k): v for k, v in settings.items()}


if os.environ.get("SANDBOX_CAPTURE"):
    _foreign = _other_interpreter()
    if _foreign is not None:
        os.environ.pop("SANDBOX_CAPTURE", None)
        try:
            if _foreign.get("services_socket"):
                _report = importlib.import_module("_sandbox_report")
                _report.watch_sqlite3(str(_foreign["services_socket"]))
        except Exception as _exc:  # never break the program being captured
            sys.stderr.write(f"sandbox: services are not reported from this process: {_exc}\n")
    else:
        try:
            from sandbox.capture.hook import start_from_env

            start_from_env()
        except Exception as _exc:  # never break the program being captured
            sys.stderr.write(f"sandbox: capture could not start in this process: {_exc}\n")

if os.environ.get("SANDBOX_REPLAY_OF"):
    try:
        from sandbox.replay.command import start_from_env as _start_replay

        _start_replay()
    except Exception as _exc:  # a replay must not run the program unreplayed (live)
        sys.stderr.write(f"sandbox: replay could not start in this process: {_exc}\n")
        sys.stderr.flush()
        os._exit(70)

if os.environ.get("SANDBOX_REPLAY_LIVE"):
    try:
        from sandbox.replay.isolation.liveprocess import start_from_env as _start_live

        _start_live()
    except Exception as _exc:  # a live server of a replay must not run on the real clock
        sys.stderr.write(f"sandbox: the replay's clock could not start in this process: {_exc}\n")
        sys.stderr.flush()
        os._exit(70)


def _chain() -> None:
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_chain()
