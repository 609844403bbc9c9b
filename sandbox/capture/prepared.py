"""An exchange of a client that prepares its request before it sends it (over urllib3:
``requests``' HTTP adapter, :mod:`sandbox.capture.requests_http`, and botocore's session,
:mod:`sandbox.capture.botocore_http`; aiohttp's ``ClientRequest``,
:mod:`sandbox.capture.aiohttp_http`): what :class:`~sandbox.capture.http.HTTPAdapter` reads
of the prepared request and of the response, in httpx's shape, a streamed urllib3 body's
tee, and how one request crosses (:meth:`PreparedExchange.plan`), the same for every such
client: a request outside any run, over a unix socket or made by the sandbox itself is sent
as it is; one whose body the client's exchange cannot record is named once on stderr and
sent past the seam (refused on replay); any other crosses the seam as an ``http`` call.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Self, TypeVar

import httpx
from pydantic import JsonValue

from sandbox.capture.http import HTTPAdapter, Tee, Uncaptured, crossing, warn_uncaptured
from sandbox.capture.origin import asker
from sandbox.seam import boundary

SCHEMES = ("http://", "https://")
"""What is recorded: requests over the network (not ``http+docker://``, a unix socket's)."""
WIRE = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Response headers that describe the bytes on the wire, not a content recorded decoded."""


class Headers:
    """What :class:`HTTPAdapter` reads of a set of headers (httpx's shape), made from a
    client's own (text or bytes values)."""

    __slots__ = ("_values", "raw")
    encoding = _encoding = "latin-1"
    """How the raw names and values are encoded (httpx's two spellings of it)."""

    def __init__(self, headers: Any, left_out: frozenset[str] = frozenset()) -> None:
        self._values = {
            str(k).lower(): v.decode("latin-1") if isinstance(v, bytes) else str(v)
            for k, v in headers.items()
        }
        for name in left_out:
            self._values.pop(name, None)
        self.raw = [
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in self._values.items()
        ]

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name.lower(), default)

    def items(self) -> Any:
        return self._values.items()


class Answer:
    """What :class:`HTTPAdapter` reads of a response: its status and headers, but those
    ``left_out`` (:data:`WIRE` for a client that gives the content decoded)."""

    __slots__ = ("headers", "status_code")

    def __init__(self, response: Any, left_out: frozenset[str]) -> None:
        self.status_code = int(response.status_code)
        self.headers = Headers(response.headers, left_out)


class PreparedRequest:
    """What the seam and :class:`HTTPAdapter` read of a prepared request."""

    __slots__ = ("headers", "method", "url")

    def __init__(self, prepared: Any) -> None:
        self.method = str(prepared.method or "GET").upper()
        self.url = httpx.URL(str(prepared.url))
        self.headers = Headers(prepared.headers)


class RawTee(Tee):
    """A streamed response's urllib3 body, teed as the client reads it (``read``: botocore's
    ``StreamingBody``; ``stream``: botocore's event stream, ``requests``' ``iter_content``);
    anything else is the body's own."""

    def read(self, amt: int | None = None, *args: Any, **kwargs: Any) -> bytes:
        try:
            data: bytes = self._inner.read(amt, *args, **kwargs)
        except BaseException as exc:
            self.finish(boundary.error_info(exc))
            raise
        if data:
            self._chunks.append(data)
        if not data or amt is None:
            self.finish()
        return data

    def stream(
        self, amt: int | None = 2**16, decode_content: bool | None = None
    ) -> Iterator[bytes]:
        while data := self.read(amt, decode_content=decode_content):
            yield data

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self.finish()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Route(enum.Enum):
    """How a request goes when it does not cross the seam (see
    :meth:`PreparedExchange.plan`)."""

    SEND = "sent as it is"
    UNCAPTURED = "its body not recorded"


E = TypeVar("E", bound="PreparedExchange")
Plan = Route | tuple[str, JsonValue, E]


class PreparedExchange(HTTPAdapter):
    """One exchange of a prepared request: a client's subclass records its response and
    rebuilds one on replay; :meth:`send` crosses the seam with it."""

    __slots__ = ("_prepared",)

    uncaptured: ClassVar[Uncaptured]
    """What is named on stderr for a request whose body is not recorded."""

    def __init__(
        self, prepared: Any, request: PreparedRequest, body: bytes | None, parsed: Any, url: str
    ) -> None:
        super().__init__(None, request, body, False, parsed, url)
        self._prepared = prepared

    @staticmethod
    def body_of(prepared: Any) -> tuple[bool, bytes | None]:
        """Whether the request's body can be recorded (not one sent from a file or a
        generator), and it as bytes (``None``: none)."""
        body = prepared.body
        if body is None or isinstance(body, bytes):
            return True, body
        if isinstance(body, str):
            return True, body.encode("utf-8")
        return False, None

    def crossing_name(self, name: str) -> str:
        """The crossing's name, from the one every HTTP exchange gets (``METHOD URL``)."""
        return name

    def send_instead(self, data: bytes) -> None:
        self._prepared.body = data
        self._prepared.headers["Content-Length"] = str(len(data))

    @classmethod
    def plan(cls, prepared: Any, depth: int, **fields: Any) -> Plan[Self]:
        """How ``prepared`` crosses the seam: :attr:`Route.SEND` as it is (outside a run, a unix
        socket's (the Docker SDK's), the sandbox's own: whose the request is is read
        ``depth`` frames above this method's caller; or the exchange could not be made:
        it fails open, and on replay the guard refuses what goes out), :attr:`Route.UNCAPTURED`
        (a body the client's exchange cannot record: named once on stderr, sent past the
        seam, refused on replay), else its crossing's name and request, and the exchange
        made with ``fields`` too."""
        url = str(prepared.url or "")
        if boundary.current() is None or not url.startswith(SCHEMES) or asker(depth) == "sandbox":
            return Route.SEND
        whole, body = cls.body_of(prepared)
        if not whole:
            warn_uncaptured(cls.uncaptured, depth=depth + 1)
            return Route.UNCAPTURED
        try:
            request = PreparedRequest(prepared)
            name, normalized, parsed, full_url = crossing(request, body)
            exchange = cls(prepared, request, body, parsed, full_url, **fields)
            return exchange.crossing_name(name), normalized, exchange
        except Exception:
            return Route.SEND

    @classmethod
    def send(cls, prepared: Any, perform: Callable[[], Any], **fields: Any) -> Any:
        """``perform()`` (the client's own send of ``prepared``) as :meth:`plan` says."""
        plan = cls.plan(prepared, 3, **fields)
        if plan is Route.SEND:
            return perform()
        if isinstance(plan, Route):  # named once: not again by urllib3's watch
            with boundary.bypassed():
                return perform()
        name, normalized, exchange = plan
        return boundary.through("http", name, normalized, perform, exchange)
