"""What a workspace capture holds, as text: the lines of its text files (see
:mod:`sandbox.services.dumptext`)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator

from sandbox.services.dumptext import Place, text_places


def files_places(data: bytes) -> Iterator[Place]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            handle = tar.extractfile(member)
            if handle is None:
                continue
            yield from text_places(f"file {member.name}", handle.read())
