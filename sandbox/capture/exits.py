"""What must run before the process ends, however it ends: at the interpreter's exit, at
``os._exit``, and when the process ends itself with a signal.

``os._exit`` ends the process at once, skipping :mod:`atexit`. Task workers end so: an RQ
work horse after each job, a ``multiprocessing`` child after its target, billiard's
children. So does a signal the process raises against itself with its default action:
uvicorn, stopped by ``SIGTERM``, shuts down gracefully, then restores the signal's default
handler and raises it again (``signal.raise_signal``), so that the process ends "killed by
``SIGTERM``" as expected. A run kept there and still being finished in the background (see
:mod:`sandbox.capture.finisher`) would be lost with the process, silently. So once something
is registered here, ``os._exit``, ``signal.raise_signal`` and ``os.kill`` are replaced (once
per process) by functions that call what was registered first (the latter two only for a
signal that ends the process: its handler is the default one, and its default action ends
it), then do what they were asked, with the status or signal they were given. It waits only
while something is pending (each registered call bounds its own wait), and what it calls
never raises. A signal sent by another process is not seen here (its default action ends the
process at once, as it always did).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import NoReturn

_hooks: list[Callable[[], object]] = []
_lock = threading.Lock()
_original_exit = os._exit
_original_raise_signal = signal.raise_signal
_original_kill = os.kill
_ENDING = frozenset(
    {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2}
)
"""Signals whose default action ends the process (those whose default is to be ignored, to
stop or to continue it do not; ``SIGKILL`` cannot wait)."""


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a parent's thread may have held it


os.register_at_fork(after_in_child=_after_fork)


def _run_hooks() -> None:
    for hook in list(_hooks):
        with contextlib.suppress(BaseException):
            hook()


def _exit(status: int) -> NoReturn:
    """``os._exit`` once :func:`at_exit` registered something: what was registered, then
    the original."""
    _run_hooks()
    _original_exit(status)


def _ends_process(sig: int) -> bool:
    """Whether ``sig`` raised now ends this process (its default action, not handled)."""
    try:
        return sig in _ENDING and signal.getsignal(sig) == signal.SIG_DFL
    except (ValueError, TypeError):  # not a signal number
        return False


def _raise_signal(sig: int, /) -> None:
    """``signal.raise_signal`` once :func:`at_exit` registered something: for a signal that
    ends the process, what was registered first."""
    if _ends_process(sig):
        _run_hooks()
    _original_raise_signal(sig)


def _kill(pid: int, sig: int, /) -> None:
    """``os.kill`` once :func:`at_exit` registered something: for a signal this process
    sends itself that ends it, what was registered first."""
    if pid == os.getpid() and _ends_process(sig):
        _run_hooks()
    _original_kill(pid, sig)


def at_exit(hook: Callable[[], object]) -> None:
    """Call ``hook`` when the process ends: at the interpreter's exit (:mod:`atexit`), at
    ``os._exit`` and at a signal it raises against itself that ends it; once however often
    it is registered."""
    with _lock:
        if hook in _hooks:
            return
        _hooks.append(hook)
        atexit.register(hook)
        os._exit = _exit
        signal.raise_signal = _raise_signal
        os.kill = _kill
