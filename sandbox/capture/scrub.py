"""Sealing a capture: what was written before a secret was learned is redacted again, and
the environment variables the run read are recorded.

A secret can be learned late: a value shows up in a tool's output, and only a later request
sends it as a bearer token. Before the run is finished, :func:`seal` runs the redactor (which
knows every secret by then) over the event log and over every text blob the run stored; a
blob that changes is stored again under its new SHA-256, the events are pointed at it, and
the old blob is removed when this run created it. The manifest is redacted again too.
"""

from __future__ import annotations

from typing import Any

from sandbox.capture.held import HeldWriter
from sandbox.capture.recorder import Recorder
from sandbox.errors import CaptureError
from sandbox.redaction import Redactor
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import EVENTS, atomic_file

_MAX_PASSES = 3
"""Redacting can teach the redactor a URL password; the log is then redacted again."""


def redact_runtime(runtime: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A runtime (as JSON) with every string redacted. Its package list maps distribution
    names, not field names, to versions: each name and version is redacted as text, never
    as the value of a credential field (``detect-secrets`` is a package, its version no
    secret)."""
    packages: dict[str, str] = runtime.get("packages") or {}
    out: dict[str, Any] = redactor.value({k: v for k, v in runtime.items() if k != "packages"})
    out["packages"] = {redactor.text(name): redactor.text(v) for name, v in packages.items()}
    return out


def redact_manifest(manifest: Manifest, redactor: Redactor) -> Manifest:
    """The manifest with every string redacted (command lines, bindings, labels ...; the
    runtime as :func:`redact_runtime` does)."""
    data = manifest.model_dump(mode="json")
    env = data.pop("env")
    runtime = data.pop("runtime")
    out = redactor.value(data)
    out["env"] = env  # made by Redactor.environ
    out["runtime"] = None if runtime is None else redact_runtime(runtime, redactor)
    check_run_id(manifest.run_id, out["run_id"])
    return Manifest.model_validate(out)


def check_run_id(run_id: str, redacted: str) -> None:
    """A :class:`CaptureError` when the run id would be redacted (``redacted``: as it
    would be): it names the run folder, and must stay what it is."""
    if redacted != run_id:
        raise CaptureError(
            "the run id holds what looks like a secret (it would be redacted); "
            "choose another run name or run_id"
        )


def recorded_env(recorder: Recorder) -> dict[str, str]:
    """The variables the run read, and those configured, with secret values as placeholders."""
    redactor = recorder.redactor
    names = recorder.env_reads | set(redactor.config.env_record)
    return redactor.environ(redactor.env, names)


def seal(recorder: Recorder) -> Manifest:
    """Redact again what was written before the last secret was learned; record the
    environment read. Call once the event log is closed; returns the updated manifest."""
    redactor = recorder.redactor
    for _ in range(_MAX_PASSES):
        known = len(redactor.learned)
        if not known:
            break
        _rewrite(recorder)
        if len(redactor.learned) == known:
            break
    manifest = recorder.writer.manifest
    env = {**manifest.env, **recorded_env(recorder)}
    sealed = redact_manifest(manifest.model_copy(update={"env": env}), redactor)
    recorder.writer.update_manifest(sealed, durable=False)  # the finished one follows
    return sealed


def _rewrite(recorder: Recorder) -> None:
    store, redactor = recorder.store, recorder.redactor
    moved: dict[str, tuple[str, int, int]] = {}
    for key, created in list(recorder.written_blobs.items()):
        data = store.get_blob(key)
        clean = redactor.bytes(data)
        if clean == data:
            continue
        ref = recorder.put_redacted(clean, "application/octet-stream")
        moved[key] = (ref.sha256, len(data), len(clean))
        recorder.written_blobs.pop(key, None)
        if created:
            store.delete_blob(key)

    def rewritten(line: bytes) -> bytes:
        out = redactor.bytes(line)
        for old, (new, old_size, new_size) in moved.items():
            if old.encode() in out:
                out = out.replace(
                    f'"sha256":"{old}","size":{old_size}'.encode(),
                    f'"sha256":"{new}","size":{new_size}'.encode(),
                ).replace(old.encode(), new.encode())
        return out

    writer = recorder.writer
    if isinstance(writer, HeldWriter) and writer.holds_lines:  # the log is in memory
        writer.replace_lines([rewritten(line) for line in writer.held()])
        return
    path = writer.folder / EVENTS
    with open(path, "rb") as src, atomic_file(path) as dst:
        for line in src:
            dst.write(rewritten(line))
