"""Every error the project raises on purpose. The CLI turns each into one line and exit code 2.

A traceback from the CLI means a bug; a :class:`SandboxError` means the input or the machine
was not as needed, and its message says what to do.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Root of every error raised on purpose by sandbox-replayer."""


# --- snapshot format and store -------------------------------------------------------------


class SnapshotError(SandboxError, ValueError):
    """A snapshot (manifest, event log, blob) is malformed or inconsistent."""


class SchemaVersionError(SnapshotError):
    """A manifest, event or bundle carries a schema version this build cannot read."""

    def __init__(self, found: object, supported: int, what: str = "snapshot") -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"{what} has schema version {found}, this sandbox-replayer reads version "
            f"{supported}: upgrade sandbox-replayer (pip install -U sandbox-replayer)"
            if isinstance(found, int) and found > supported
            else f"{what} has schema version {found!r}, this sandbox-replayer reads version "
            f"{supported}"
        )


class IntegrityError(SnapshotError):
    """A stored hash does not match the content: the file was corrupted or tampered with."""


class StoreError(SandboxError):
    """The snapshot store cannot do what was asked."""


class StoreWriteError(StoreError):
    """The store cannot be written: its file system is read-only or full, a quota or a
    permission stops the write. Nothing half-written is left."""


class UnknownRunError(StoreError, KeyError):
    """No run with this id is in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown run"


class UnsafePathError(StoreError):
    """A run id, blob key or bundle member would escape the store."""


class NotRegularFileError(StoreError):
    """A file in the store is a symbolic link, a device, a fifo or a folder: it is not
    followed or read (a blob linked to ``/dev/zero`` would never end)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class BundleError(SnapshotError):
    """A bundle file cannot be read or is refused as unsafe."""


class ExportRefusedError(StoreError):
    """A run is not exported: the scan before sharing found likely secrets or personal
    data that no ``--allow`` accepts."""


# --- capture -------------------------------------------------------------------------------


class CaptureError(SandboxError):
    """The capture agent cannot record as asked."""


# --- environment services and containers ---------------------------------------------------


class ServiceError(SandboxError):
    """A service kind cannot capture, restore or hash its state."""


class QueryRefusedError(ServiceError):
    """A query a service kind was asked to check (an SQL invariant) is refused: it is not one
    read-only statement, or it tried to write, or it ran past its time limit."""


class UnknownNameError(SandboxError, LookupError):
    """A name (service kind, policy, matcher, store backend) is not registered."""

    def __init__(self, what: str, name: str, valid: list[str]) -> None:
        super().__init__(f"unknown {what} {name!r}; valid: {', '.join(sorted(valid))}")


class ContainerError(SandboxError):
    """The container sandbox cannot be brought up: the engine, an image, the machine's
    resources or a service container."""


class DockerUnavailableError(ContainerError):
    """The Docker engine does not answer."""


class ImageMissingError(ContainerError):
    """A needed image is not built locally."""


class ServiceNotReadyError(ContainerError, ServiceError):
    """A service container never became ready; the message carries its last log lines."""


class ResourceError(ContainerError):
    """The machine lacks the memory or disk a sandbox needs; the message names how much."""


class ImageBuildError(ContainerError):
    """Building a service or runner image failed; the message carries the build's last lines."""


class MaskRuleError(ServiceError, ValueError):
    """A masking rule (``--mask``, a mask file) cannot be read."""


class ServiceVersionError(ServiceError):
    """Captured state comes from a newer server than the sandbox image runs."""


# --- replay --------------------------------------------------------------------------------


class ReplayError(SandboxError):
    """The replay cannot proceed."""


class ReplayMismatchError(ReplayError):
    """A request made during replay has no match in the recording.

    Besides the message, it carries JSON-like data for reports: the boundary (``kind``,
    ``name``), the request made (``actual``), the nearest recorded request (``expected``,
    ``None`` when nothing of that kind and name was recorded), the field-level ``diff``
    between them (dicts with ``path``, ``change``, ``expected``, ``actual``) and the ranked
    ``candidates`` (dicts with ``seq`` and ``differences``).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        actual: object = None,
        expected: object = None,
        diff: list[dict[str, object]] | None = None,
        candidates: list[dict[str, object]] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.actual = actual
        self.expected = expected
        self.diff = diff or []
        self.candidates = candidates or []


class UntrustedRunError(ReplayError):
    """An imported run would run a command, or code from outside the project, on this host,
    and the user did not trust it (``--trust``)."""


class NetworkRefusedError(ReplayError):
    """A replayed agent tried to reach a host (or look up a name) outside the sandbox that no
    policy serves live. A replay that saw one is inconclusive, with this as its reason."""

    def __init__(self, message: str, *, host: str, port: int | str | None) -> None:
        super().__init__(message)
        self.host = host
        self.port = port


class PolicyError(ReplayError, ValueError):
    """A replay policy rule (``--live 'tool:db.*'``) cannot be parsed."""


class ForkError(ReplayError, ValueError):
    """A fork's edits do not fit its parent run: a step that does not exist or cannot be
    overridden, an override that is not JSON, a parameter without ``=``."""


class PredicateError(ReplayError):
    """A failure predicate cannot be evaluated: it is malformed, or its query failed."""


class MissingEnvironmentError(ReplayError, KeyError):
    """A variable the run depended on was redacted at capture and is not supplied."""

    def __init__(self, run_id: str, names: list[str]) -> None:
        self.run_id = run_id
        self.names = names
        super().__init__(
            f"run {run_id} needs {', '.join(names)} (redacted at capture): set "
            f"{'it' if len(names) == 1 else 'them'} in the environment before replaying"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


# --- OpenTelemetry -------------------------------------------------------------------------


class RegressionError(SandboxError, ValueError):
    """A regression test or a CI check cannot be set up as asked: a file name that does not
    end in ``.py``, a file that exists, a number of replays below one, a shard not ``I/N``."""


class OTelError(SandboxError):
    """A run cannot be sent to an OpenTelemetry collector, or written as a trace."""


class OTelImportError(OTelError, ValueError):
    """An OTLP/JSON file cannot be read, or holds no trace a run can be made of."""
