"""A web app that captures its requests (ASGI: :mod:`sandbox.capture.asgi`; WSGI:
:mod:`sandbox.capture.wsgi`), and what replays one of its requests: the entrypoint either
middleware records when given none is the app itself."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sandbox.capture import asgi, wsgi


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
