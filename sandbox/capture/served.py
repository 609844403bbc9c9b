"""A web app that captures its requests (ASGI: :mod:`sandbox.capture.asgi`; WSGI:
:mod:`sandbox.capture.wsgi`), and what replays one of its requests: the entrypoint either
middleware records when given none is the app itself, or the function that makes it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sandbox.capture import asgi, wsgi
from sandbox.errors import ReplayError

MADE = "()"
"""How an entrypoint names a function that makes the app (``shop:create_app()``)."""


def captures(app: object) -> bool:
    """Whether ``app`` is an ASGI or WSGI app that captures its requests."""
    return asgi.captures(app) or wsgi.captures(app)


def request_replayer(app: object) -> Callable[[], int] | None:
    """What replays a request ``app`` captured, when it is an app that captures: the
    replay of an ASGI request through it, else of a WSGI one; ``None`` otherwise."""
    found: Any = app
    if asgi.captures(app):
        return functools.partial(asgi.replay_request, found)
    if wsgi.captures(app):
        return functools.partial(wsgi.replay_wsgi_request, found)
    return None


class MadeApp:
    """An app factory named as an entrypoint (``shop:create_app()``): each replay calls it,
    inside the run as the server did before serving, and sends the run's request through
    the app it returns, which must capture its requests."""

    def __init__(self, factory: Callable[[], object], target: str) -> None:
        self.factory = factory
        self.target = target

    def __call__(self) -> int:
        app = self.factory()
        replay = request_replayer(app)
        if replay is None:
            raise ReplayError(
                f"entrypoint {self.target!r} made {type(app).__name__}, not an app "
                "that captures its requests"
            )
        return replay()
