"""moto's S3 server in a process of its own, with a request log and a switch for an outage.

``python tests/s3_server.py PORT LOG`` serves moto's S3 API on 127.0.0.1:PORT and appends
``METHOD PATH`` to LOG for every request before it is answered. While the file ``LOG.hold``
exists and a request's path ends with the text it holds (``METHOD SUFFIX``: that method
only), that request waits (logged as ``HELD METHOD PATH``); when the file goes away it is
refused with 503: a write that never landed, as in an outage. While ``LOG.down`` exists every
request is refused with 503 at once (logged as ``DOWN METHOD PATH``). Used by the fixtures of
``tests/conftest.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


def logged(app: Any, log: Path) -> Callable[[Environ, StartResponse], Iterable[bytes]]:
    hold, down = Path(f"{log}.hold"), Path(f"{log}.down")

    def note(line: str) -> None:
        with log.open("a") as f:
            f.write(line + "\n")

    def wsgi(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if down.exists():
            note(f"DOWN {method} {path}")
            start_response("503 Service Unavailable", [("Content-Length", "0")])
            return [b""]
        try:
            only, _, suffix = hold.read_text().strip().rpartition(" ")
        except OSError:
            only, suffix = "", ""
        if suffix and path.endswith(suffix) and only in ("", method):
            note(f"HELD {method} {path}")
            while hold.exists():
                time.sleep(0.05)
            start_response("503 Service Unavailable", [("Content-Length", "0")])
            return [b""]
        note(f"{method} {path}")
        result: Iterable[bytes] = app(environ, start_response)
        return result

    return wsgi


def main() -> None:
    port, log = int(sys.argv[1]), Path(sys.argv[2])
    app = logged(DomainDispatcherApplication(create_backend_app), log)
    server = make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)
    server.serve_forever()


if __name__ == "__main__":
    main()
