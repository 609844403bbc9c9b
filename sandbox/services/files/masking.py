"""Masking a workspace capture (see :mod:`sandbox.services.masking`): the files a target's
glob matches are changed in a scratch copy, captured again."""

from __future__ import annotations

import fnmatch
import tempfile
from collections.abc import Callable
from pathlib import Path

from sandbox.services.base import CapturedState, ServiceKind
from sandbox.services.files import touched
from sandbox.services.masking import Masker, MaskRule, masked_state


def mask_files(
    kind: ServiceKind,
    endpoint: str,
    state: CapturedState,
    rules: list[MaskRule],
    m: Masker,
    *,
    recapture: Callable[[str], CapturedState] | None = None,
) -> CapturedState:
    """``recapture`` (default: the kind's ``capture``) takes the scratch copy back masked."""
    with tempfile.TemporaryDirectory(prefix="sandbox-mask-") as tmp:
        root = Path(tmp) / "workspace"
        kind.restore(str(root), state.data)
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(root).as_posix()
            for rule in rules:
                if fnmatch.fnmatchcase(rel, rule.target):
                    path.write_bytes(m.apply_bytes(rule.method, path.read_bytes()))
        masked = (recapture or kind.capture)(str(root))
        touched.unwatch(str(root))
    return masked_state(masked, rules)
