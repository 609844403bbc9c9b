"""A guard in front of :mod:`tarfile` for untrusted archives: headers are checked before
``tarfile`` parses them.

``tarfile`` reads a PAX extended header or a GNU long name whole before a caller sees the
member, and follows GNU sparse maps: a small compressed file can make it allocate gigabytes.
:class:`TarGuard` wraps the decompressed stream and walks the tar headers itself as the bytes
go by (it knows where each header starts from the sizes of the ones before), and refuses,
before the bytes reach ``tarfile``:

* sparse members (GNU type ``S``, or PAX ``GNU.sparse.*`` records);
* PAX extended headers longer than :data:`MAX_EXTENDED_HEADER` bytes;
* GNU long names and link names longer than :data:`MAX_LONG_NAME` bytes;
* more headers than the caller allows.

Every error is one short line: names from the archive are cut by :func:`shown`.
"""

from __future__ import annotations

from typing import Protocol

from sandbox.errors import BundleError

BLOCK = 512
MAX_EXTENDED_HEADER = 64 * 1024
MAX_LONG_NAME = 4096
MAX_SHOWN = 60
"""Characters of a name from an archive shown in an error."""


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def shown(name: str | bytes, limit: int = MAX_SHOWN) -> str:
    """``repr`` of a name from an archive, cut to ``limit`` characters."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    text = repr(name[: limit + 1])
    return text if len(name) <= limit else text[: limit + 1] + "…'"


def _number(field: bytes) -> int | None:
    """A tar numeric field: octal text, or base-256 when the high bit of the first byte is
    set. ``None`` when it is neither."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip(b" \0")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        return None


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


class TarGuard:
    """A read-only stream that checks the tar headers passing through it."""

    def __init__(self, inner: Readable, source: str, max_headers: int) -> None:
        self.inner = inner
        self.source = source
        self.max_headers = max_headers
        self.headers = 0
        self._pos = 0  # stream offset of the first byte in _buf
        self._buf = bytearray()
        self._next = 0  # stream offset of the next header
        self._pax: tuple[int, int] | None = None  # (start, size) of a PAX body to read
        self._size_override: int | None = None
        self._done = False

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        if data and not self._done:
            self._buf += data
            self._walk()
        return data

    def _refuse(self, message: str) -> BundleError:
        self._done = True
        return BundleError(f"{self.source}: refused: {message}")

    def _walk(self) -> None:
        while not self._done:
            if self._pax is not None:
                start, size = self._pax
                if self._pos + len(self._buf) < start + size:
                    return
                body = bytes(self._buf[start - self._pos : start + size - self._pos])
                self._pax = None
                self._read_pax(body)
                continue
            end = self._next + BLOCK
            if self._pos + len(self._buf) < end:
                break
            header = bytes(self._buf[self._next - self._pos : end - self._pos])
            self._header(header)
        keep_from = min(self._next, self._pax[0] if self._pax else self._next)
        drop = min(keep_from - self._pos, len(self._buf))
        if drop > 0:
            del self._buf[:drop]
            self._pos += drop

    def _header(self, header: bytes) -> None:
        if header == bytes(BLOCK):  # end of archive: tarfile stops here too
            self._done = True
            return
        self.headers += 1
        if self.headers > self.max_headers:
            raise self._refuse(f"more than {self.max_headers} tar headers")
        name = header[:100].split(b"\0", 1)[0]
        kind = header[156:157]
        size = _number(header[124:136])
        if size is None or size < 0:
            self._done = True  # tarfile reports a damaged header itself
            return
        if kind == b"S":
            raise self._refuse(f"member {shown(name)} is sparse (not accepted)")
        if kind in (b"L", b"K") and size > MAX_LONG_NAME:
            raise self._refuse(
                f"GNU long name of {size} bytes (more than the limit of {MAX_LONG_NAME})"
            )
        data_start = self._next + BLOCK
        if kind in (b"x", b"g"):
            if size > MAX_EXTENDED_HEADER:
                raise self._refuse(
                    f"PAX extended header of {size} bytes "
                    f"(more than the limit of {MAX_EXTENDED_HEADER})"
                )
            self._pax = (data_start, size)
        elif self._size_override is not None:
            size = self._size_override
        if kind not in (b"x", b"g"):
            self._size_override = None
        self._next = data_start + _padded(size)

    def _read_pax(self, body: bytes) -> None:
        """Read the records of a PAX header: refuse sparse ones, note a ``size``."""
        pos = 0
        while pos < len(body):
            space = body.find(b" ", pos)
            if space < 0:
                return
            try:
                length = int(body[pos:space])
            except ValueError:
                return  # tarfile reports the damaged header
            if length <= 0:
                return
            record = body[space + 1 : pos + length].rstrip(b"\n")
            keyword, _, value = record.partition(b"=")
            if keyword.startswith(b"GNU.sparse"):
                raise self._refuse("a sparse member (PAX GNU.sparse records are not accepted)")
            if keyword == b"size":
                try:
                    self._size_override = int(value)
                except ValueError:
                    return
            pos += length
